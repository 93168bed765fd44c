/* What kernels.c shares with kernel_stubs.c. Private to the runtime library. */
#ifndef PLUGGABLE_RUNTIME_KERNELS_INTERNAL_H_
#define PLUGGABLE_RUNTIME_KERNELS_INTERNAL_H_

#include "tensorflow/c/kernels.h"

/* Records a failure on a running kernel's context, as TF_OpKernelContext_Failure does (the
 * first failure wins); the run then fails with it. For functions that take a context but
 * no status. */
void pg_context_fail(TF_OpKernelContext* ctx, TF_Code code, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The message every function this runtime does not implement gives. */
#define PG_UNIMPLEMENTED_FMT "%s is not implemented by pluggable"

#endif
