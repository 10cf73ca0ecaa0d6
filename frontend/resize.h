/* resize.h — interpolation along static axes on the IR builder, shared by the .coil resize
 * builtin (pooling.c) and the ONNX importer's Resize (onnx_conv.c): one axis at a time, a
 * gather where each output copies one input element, else a matmul by constant
 * coefficients, so the gradient is an index_add or a matmul. */
#ifndef COIL_FRONTEND_RESIZE_H
#define COIL_FRONTEND_RESIZE_H

#include "ir/ir.h"

typedef enum ResizeMode { RESIZE_NEAREST, RESIZE_LINEAR, RESIZE_CUBIC } ResizeMode;

/* Where output element y lies in the input (ONNX's coordinate_transformation_mode; scale is
 * the axis's out / in unless the caller gives the one the output was sized by). */
typedef enum ResizeCoord {
    COORD_HALF_PIXEL,           /* (y + 0.5) / scale - 0.5: PyTorch's align_corners=False */
    COORD_HALF_PIXEL_SYMMETRIC, /* half_pixel, centred when out is not scale * in */
    COORD_PYTORCH_HALF_PIXEL,   /* half_pixel, but -0.5 for an output of one element */
    COORD_ALIGN_CORNERS,        /* y (in - 1) / (out - 1): the corners' centres meet */
    COORD_ASYMMETRIC,           /* y / scale: PyTorch's nearest */
    COORD_TF_CROP_AND_RESIZE,   /* y within the region of interest */
} ResizeCoord;

/* Which neighbour nearest takes at a fraction (ONNX's nearest_mode). */
typedef enum ResizeNearest {
    NEAREST_ROUND_PREFER_FLOOR, NEAREST_ROUND_PREFER_CEIL, NEAREST_FLOOR, NEAREST_CEIL,
} ResizeNearest;

/* ONNX's spellings of the three enums, in their order. */
extern const char *const resize_mode_names[3];
extern const char *const resize_coord_names[6];
extern const char *const resize_nearest_names[4];

typedef struct Resize {
    ResizeMode mode;
    ResizeCoord coord;
    ResizeNearest nearest;
    double cubic_a;       /* the cubic kernel's a: -0.75 (PyTorch's and ONNX's default) */
    double extrapolation; /* tf_crop_and_resize's value outside the input */
    bool antialias, exclude_outside;
} Resize;

/* x resized along a static axis to `out` elements, its coordinates at `scale` (above) and,
 * for tf_crop_and_resize, roi the axis's [start, end] (else {0, 1}): a gather when every
 * output copies one element, else a matmul along the axis (moved last and back), which
 * needs a float x (an integer one is ERR_UNSUPPORTED in the builder's Err). */
int resize_axis(Builder *b, int x, int axis, const Resize *r, double scale, int64_t out,
                const double roi[2]);

#endif
