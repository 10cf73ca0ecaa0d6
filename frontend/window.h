/* window.h — sliding windows and padding on the IR builder, shared by the .coil pool and pad
 * builtins (pooling.c) and the ONNX importer (pools, Pad, the convolutions' geometry,
 * ConvTranspose). */
#ifndef COIL_FRONTEND_WINDOW_H
#define COIL_FRONTEND_WINDOW_H

#include "ir/ir.h"

enum { WINDOW_MAX_SPATIAL = 3 };

/* One geometry over x[N, C, spatial...]: sizes in, kernel, stride, dilation, pads before
 * and after (ceil_mode's extension of the end is `extra`, apart from the pads so that
 * average pools do not count it), and the output size. what names the op in errors (NULL:
 * none, as the ONNX importer prefixes its node). */
typedef struct Window {
    const char *what;
    int n;
    int64_t in[WINDOW_MAX_SPATIAL], k[WINDOW_MAX_SPATIAL], stride[WINDOW_MAX_SPATIAL];
    int64_t dil[WINDOW_MAX_SPATIAL], pad0[WINDOW_MAX_SPATIAL], pad1[WINDOW_MAX_SPATIAL];
    int64_t extra[WINDOW_MAX_SPATIAL], out[WINDOW_MAX_SPATIAL];
} Window;

/* Errors go into the builder's Err (so later builder calls return -1), unlocated: the
 * caller's builder location or ONNX node says where. Those coil could lift one day
 * (symbolic or too many axes, negative pool pads, padding wider than reflect allows) are
 * ERR_UNSUPPORTED, which the ONNX importer lists instead of stopping. */

/* w's sizes from x[N, C, spatial...] (1 to 3 static spatial axes); kernel, stride and
 * dilation 1, no pads. False with the error when x does not fit. */
bool window_init(Builder *b, const char *what, const Type *x, Window *w);
/* w's output sizes (and ceil_mode's extra) from the rest, after checking them: kernel,
 * stride and dilation at least 1, pads not negative, the kernel's span within the padded
 * input. ceil_mode adds a last partial window where it starts inside the input or its
 * begin padding (PyTorch's rule, and ONNX's). */
bool window_size(Builder *b, Window *w, bool ceil_mode);

/* x[N, C, s1, s2, ...] padded with pad_value (and ceil_mode's extra), then gathered into
 * its windows [N, C, o1, k1, o2, k2, ...]: one gather of constant indices per axis. */
int window_gather(Builder *b, int x, const Window *w, double pad_value);
/* op (OP_SUM, OP_MAX...) over the k axes of window_gather's result: [N, C, o1, o2, ...]. */
int window_reduce(Builder *b, int op, int windows, const Window *w);
/* Max pooling, the padding the dtype's lowest value (-inf for floats). */
int window_max_pool(Builder *b, int x, const Window *w);
/* Average pooling: each window's sum over its count of elements inside the input, or
 * inside the input and its pads (include_pad); ceil_mode's extension never counts. */
int window_avg_pool(Builder *b, int x, const Window *w, bool include_pad);
/* op (OP_MEAN, OP_MAX) over every axis after N and C, kept: [N, C, 1, 1, ...]. */
int window_global_pool(Builder *b, const char *what, int op, int x);

/* The transposed convolution of x[N, C, spatial...] by weight[C, M/groups, k...] (PyTorch's
 * and ONNX's layout), no bias: w from window_init with its stride, dilation, pad0 and pad1
 * (cut from the full output's ends) and extra (output_padding, added at the end) set; fills
 * w's kernel and output sizes. A conv of x spread with stride-1 zeros between elements,
 * padded by the kernel's span less the pads, by the kernel flipped with its channel axes
 * swapped per group. */
int window_conv_transpose(Builder *b, int x, int weight, int64_t groups, Window *w);

typedef enum PadMode { PAD_CONSTANT, PAD_REFLECT, PAD_EDGE, PAD_WRAP } PadMode;

/* x with `before` and `after` elements added along a static axis (negative: that many cut
 * first): copies of value (a one-element node of x's dtype) for PAD_CONSTANT, the mirror
 * image without the edge element (PAD_REFLECT, narrower than the axis), copies of the edge
 * element (PAD_EDGE), or the other end's elements (PAD_WRAP, at most the axis). */
int window_pad(Builder *b, const char *what, int x, int axis, int64_t before, int64_t after,
               PadMode mode, int value);
/* x reversed along a static axis: a gather of n-1 ... 0. */
int window_reverse(Builder *b, int x, int axis);

#endif
