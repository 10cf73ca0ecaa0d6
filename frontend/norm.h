/* norm.h — group and instance normalization on the IR builder, shared by the .coil builtins
 * (group_norm, instance_norm) and the ONNX importer (GroupNormalization, InstanceNormalization). */
#ifndef COIL_FRONTEND_NORM_H
#define COIL_FRONTEND_NORM_H

#include "ir/ir.h"

/* (x - mean) / sqrt(var + eps) over axes (the biased variance), in x's dtype; the kept mean
 * and 1/sqrt(var + eps) go to *mean and *inv when not NULL. */
int norm_moments(Builder *b, int x, const int64_t *axes, int n, double eps, int *mean, int *inv);
/* x[N, C, ...] (C static and divisible by groups) normalized over each group of C/groups
 * channels and every spatial axis, as [N, groups, C/groups * ...]; no scale or bias. */
int norm_group(Builder *b, int x, int64_t groups, double eps);
/* x[N, C, ...] normalized over each channel's spatial axes; no scale or bias. */
int norm_instance(Builder *b, int x, double eps);
/* v[C] as [1, C, 1, ...] beside a tensor of type y, in y's dtype. */
int norm_channels(Builder *b, int v, const Type *y);
/* y[N, C, ...] times weight[C] plus bias[C] along axis 1 (either -1: none), both cast to
 * y's dtype. */
int norm_affine(Builder *b, int y, int weight, int bias);

#endif
