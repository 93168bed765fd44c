/* What kernels.c shares with kernel_stubs.c. Private to the runtime library. */
#ifndef PLUGGABLE_RUNTIME_KERNELS_INTERNAL_H_
#define PLUGGABLE_RUNTIME_KERNELS_INTERNAL_H_

#include <stdbool.h>

#include "runtime_internal.h"
#include "tensorflow/c/kernels.h"

/* Records a failure on a running kernel's context, as TF_OpKernelContext_Failure does (the
 * first failure wins); the run then fails with it. For functions that take a context but
 * no status. */
void pg_context_fail(TF_OpKernelContext* ctx, TF_Code code, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* What kernels_experimental.c reads of a running kernel's context: input `i`'s bytes, type
 * and memory space (false for an index out of range), the run's device allocator and the
 * ordinal of its device. */
bool pg_context_input(TF_OpKernelContext* ctx, int i, const void** data, TF_DataType* dtype,
                      bool* host_memory);
PG_BFC* pg_context_allocator(TF_OpKernelContext* ctx);
int pg_context_device_id(TF_OpKernelContext* ctx);

/* The message every function this runtime does not implement gives. */
#define PG_UNIMPLEMENTED_FMT "%s is not implemented by pluggable"

#endif
