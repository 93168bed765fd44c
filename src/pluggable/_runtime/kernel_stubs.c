/* kernel_stubs.c: the functions of tensorflow/c/kernels.h that pluggable does not implement.
 *
 * Each is exported, so a plugin that calls one loads and runs; the call fails instead:
 *   - a function with a TF_Status sets TF_UNIMPLEMENTED, "<function> is not implemented by
 *     pluggable", and returns what TensorFlow returns on failure (NULL, nothing);
 *   - a function with a kernel context but no status records that failure on the context
 *     (as TF_OpKernelContext_Failure would), so the kernel's run fails with it, and returns
 *     an empty value.
 * What each one would need: serialized protos (a protobuf encoder and the session's
 * ConfigProto and function library), tensor and function attributes, TensorFlow's
 * rendezvous and resource manager, the op's argument names (TF_InputRange), and an
 * executor that lets kernels finish after compute returns (asynchronous kernels, deferred
 * ops).
 */
#include <string.h>

#include "kernels_internal.h"
#include "runtime_internal.h"
#include "tensorflow/c/kernels.h"

#define UNIMPLEMENTED(status, name) \
  TF_SetStatus((status), TF_UNIMPLEMENTED, name " is not implemented by pluggable")

static const char kEmpty[] = "";

/* ---- with a status ------------------------------------------------------------------------ */

void TF_GetSerializedFunctionDefLibrary(TF_OpKernelContext* ctx,
                                        TF_Buffer* serialized_function_def_library,
                                        TF_Status* status) {
  (void)ctx;
  (void)serialized_function_def_library;
  UNIMPLEMENTED(status, "TF_GetSerializedFunctionDefLibrary");
}

void TF_GetSerializedConfigProto(TF_OpKernelContext* ctx, TF_Buffer* serialized_config_proto,
                                 TF_Status* status) {
  (void)ctx;
  (void)serialized_config_proto;
  UNIMPLEMENTED(status, "TF_GetSerializedConfigProto");
}

void TF_GetSerializedResourceHandleProto(TF_OpKernelContext* ctx, int i,
                                         TF_Buffer* serialized_resource_handle_proto,
                                         TF_Status* status) {
  (void)ctx;
  (void)i;
  (void)serialized_resource_handle_proto;
  UNIMPLEMENTED(status, "TF_GetSerializedResourceHandleProto");
}

void TF_OpKernelConstruction_GetAttrTensor(TF_OpKernelConstruction* ctx, const char* attr_name,
                                           TF_Tensor** val, TF_Status* status) {
  (void)ctx;
  (void)attr_name;
  if (val != NULL) *val = NULL;
  UNIMPLEMENTED(status, "TF_OpKernelConstruction_GetAttrTensor");
}

void TF_OpKernelConstruction_GetAttrTensorList(TF_OpKernelConstruction* ctx,
                                               const char* attr_name, TF_Tensor** vals,
                                               int max_values, TF_Status* status) {
  (void)ctx;
  (void)attr_name;
  for (int i = 0; vals != NULL && i < max_values; i++) vals[i] = NULL;
  UNIMPLEMENTED(status, "TF_OpKernelConstruction_GetAttrTensorList");
}

TF_Buffer* TF_OpKernelConstruction_GetAttrFunction(TF_OpKernelConstruction* ctx,
                                                   const char* attr_name, TF_Status* status) {
  (void)ctx;
  (void)attr_name;
  UNIMPLEMENTED(status, "TF_OpKernelConstruction_GetAttrFunction");
  return NULL;
}

TF_Buffer* TF_OpKernelConstruction_GetNodeDef(TF_OpKernelConstruction* ctx, TF_Status* status) {
  (void)ctx;
  UNIMPLEMENTED(status, "TF_OpKernelConstruction_GetNodeDef");
  return NULL;
}

void TF_InputRange(TF_OpKernelContext* ctx, const char* name, TF_InputRange_Args* args) {
  (void)name;
  if (args == NULL) {
    pg_context_fail(ctx, TF_INVALID_ARGUMENT, "TF_InputRange: args is NULL");
    return;
  }
  args->start = -1;
  args->stop = -1;
  if (args->status != NULL) UNIMPLEMENTED(args->status, "TF_InputRange");
  else pg_context_fail(ctx, TF_UNIMPLEMENTED, PG_UNIMPLEMENTED_FMT, "TF_InputRange");
}

/* ---- with a context and no status: the run fails ------------------------------------------ */

int TF_GetGraphDefVersion(TF_OpKernelContext* ctx) {
  pg_context_fail(ctx, TF_UNIMPLEMENTED, PG_UNIMPLEMENTED_FMT, "TF_GetGraphDefVersion");
  return 0;
}

TF_StringView TF_GetResourceMgrDefaultContainerName(TF_OpKernelContext* ctx) {
  pg_context_fail(ctx, TF_UNIMPLEMENTED, PG_UNIMPLEMENTED_FMT,
                  "TF_GetResourceMgrDefaultContainerName");
  TF_StringView view = {kEmpty, 0};
  return view;
}

TF_StringView TF_GetOpKernelRequestedInput(TF_OpKernelContext* ctx, size_t index) {
  (void)index;
  pg_context_fail(ctx, TF_UNIMPLEMENTED, PG_UNIMPLEMENTED_FMT, "TF_GetOpKernelRequestedInput");
  TF_StringView view = {kEmpty, 0};
  return view;
}

TF_RendezvousThunk TF_GetRendezvous(TF_OpKernelContext* ctx) {
  pg_context_fail(ctx, TF_UNIMPLEMENTED, PG_UNIMPLEMENTED_FMT, "TF_GetRendezvous");
  TF_RendezvousThunk thunk;
  memset(&thunk, 0, sizeof thunk);
  return thunk;
}

void TF_IncNumDeferredOps(TF_OpKernelContext* ctx) {
  pg_context_fail(ctx, TF_UNIMPLEMENTED, PG_UNIMPLEMENTED_FMT, "TF_IncNumDeferredOps");
}

void TF_DecNumDeferredOps(TF_OpKernelContext* ctx) {
  pg_context_fail(ctx, TF_UNIMPLEMENTED, PG_UNIMPLEMENTED_FMT, "TF_DecNumDeferredOps");
}

/* Asynchronous kernels never run (pluggable_KernelRun refuses them), so nothing can be
 * waiting for this call: it does nothing. */
void TF_RunAsyncOpKernelDoneCallback(TF_AsyncOpKernelDoneCallback* done) { (void)done; }
