/* data.h — training batches: a flat binary token file (uint8, uint16 or uint32 tokens,
 * nanoGPT's convention; uint8 makes any text a character-level corpus) sampled at random
 * offsets into (inputs, targets shifted by one), or rows of .npy arrays sampled together,
 * made by a background thread into a bounded queue, so a step never waits on the disk. */
#ifndef COIL_RUNTIME_DATA_H
#define COIL_RUNTIME_DATA_H

#include "ir/ir.h"

typedef struct Loader Loader;

/* The rows of each global batch a loader draws: part `part` of `parts` (a data-parallel
 * rank's share; {0, 1}: all). Row r of part p is the global batch's row p * B + r, so the
 * ranks together draw what one process drawing B * parts rows would. */
typedef struct DataShard {
    int part, parts;
} DataShard;

/* Tokens of `width` bytes (1, 2, 4) from path, memory-mapped; batches of B rows of T
 * tokens (int64 tensors [B, T]) drawn from the sampler's Philox stream `seed`, batch
 * number `first` onwards (resuming at a batch number redraws the same batches). `depth`
 * batches are made ahead. Errors name the file: unreadable, fewer than T + 1 tokens, a
 * size not a multiple of the width. */
Loader *loader_open(const char *path, int width, int64_t B, int64_t T, uint64_t seed,
                    uint64_t first, int depth, DataShard shard, Err *e);
/* A dataset of arrays (taken over): the same drawn row of each, B rows a batch (each
 * array's leading dimension counts samples, the same in all). Errors name the array. */
Loader *loader_open_arrays(Tensor *arrays, const char *const *names, int n, int64_t B,
                           uint64_t seed, uint64_t first, int depth, DataShard shard, Err *e);
/* The next batch (blocks until the thread has made it) into *out[i] (freed first, then
 * the caller's): tokens then targets, or one tensor per array. */
bool loader_take(Loader *l, Tensor *const *out, Err *e);
/* Batches handed out so far, counting from batch 0 (for checkpoints). */
uint64_t loader_position(const Loader *l);
/* The largest token + 1 (a model's vocabulary must be at least this). */
int64_t loader_vocab(const Loader *l);
int64_t loader_tokens(const Loader *l);
void loader_free(Loader *l);

#endif
