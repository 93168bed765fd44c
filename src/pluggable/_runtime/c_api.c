/* The functions of TensorFlow's c_api.h and c_api_experimental.h that plugins built against
 * TensorFlow import, and that make sense without TensorFlow:
 *
 *   TF_Version                    the TensorFlow release these headers match;
 *   TF_GetAllOpList               a serialized OpList of the op library (pluggable's ops and
 *                                 those plugins registered with ops.h);
 *   TF_GetRegisteredKernelsForOp  a serialized KernelList of the kernels of one op: the CPU's
 *   TF_GetAllRegisteredKernels    own (the op library's references, priority 0) and every
 *                                 enabled kernel plugins registered; of every op;
 *   TF_OpIsStateful               the op's OpDef.is_stateful;
 *   TF_GetXlaAutoJitEnabled       0: pluggable compiles nothing with XLA.
 *
 * The op library and the kernel registry's decisions live in Python. Python installs one
 * query function at import (pluggable_SetHostQuery, from pluggable.kernels.c_api) that
 * answers these in protobuf's wire format; until it is installed they fail (with a status)
 * or, for TF_GetAllOpList, which has none, return an empty OpList. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "runtime_internal.h"
#include "tensorflow/c/tf_buffer.h"
#include "tensorflow/c/tf_status.h"

/* TensorFlow's TF_VERSION_STRING for the release whose headers include/ reproduces. */
#define PG_TENSORFLOW_VERSION "2.21.0"

static _Atomic(PG_HostQuery) host_query;

void pluggable_SetHostQuery(PG_HostQuery query) { atomic_store(&host_query, query); }

/* Asks the host's query; NULL with `status` set when there is none or it failed. */
static TF_Buffer* ask(int what, const char* name, const char* function, TF_Status* status) {
  char message[256];
  PG_HostQuery query = atomic_load(&host_query);
  if (query == NULL) {
    snprintf(message, sizeof message, "%s: pluggable's op library is not loaded in this "
             "process (import pluggable before loading the plugin)", function);
    TF_SetStatus(status, TF_FAILED_PRECONDITION, message);
    return NULL;
  }
  TF_SetStatus(status, TF_OK, "");
  TF_Buffer* buffer = (TF_Buffer*)query(what, name, status);
  if (buffer == NULL && TF_GetCode(status) == TF_OK) {
    snprintf(message, sizeof message, "%s: the host gave no answer", function);
    TF_SetStatus(status, TF_INTERNAL, message);
  }
  if (TF_GetCode(status) != TF_OK && buffer != NULL) {
    TF_DeleteBuffer(buffer);
    buffer = NULL;
  }
  return buffer;
}

const char* TF_Version(void) { return PG_TENSORFLOW_VERSION; }

TF_Buffer* TF_GetAllOpList(void) {
  TF_Status* status = TF_NewStatus();
  TF_Buffer* buffer = ask(PG_QUERY_OP_LIST, "", "TF_GetAllOpList", status);
  TF_DeleteStatus(status);
  return buffer != NULL ? buffer : TF_NewBuffer(); /* an empty OpList */
}

TF_Buffer* TF_GetRegisteredKernelsForOp(const char* name, TF_Status* status) {
  if (name == NULL) {
    TF_SetStatus(status, TF_INVALID_ARGUMENT, "TF_GetRegisteredKernelsForOp: name is NULL");
    return NULL;
  }
  return ask(PG_QUERY_KERNELS_FOR_OP, name, "TF_GetRegisteredKernelsForOp", status);
}

TF_Buffer* TF_GetAllRegisteredKernels(TF_Status* status) {
  return ask(PG_QUERY_ALL_KERNELS, "", "TF_GetAllRegisteredKernels", status);
}

int TF_OpIsStateful(const char* op_type, TF_Status* status) {
  if (op_type == NULL) {
    TF_SetStatus(status, TF_INVALID_ARGUMENT, "TF_OpIsStateful: op_type is NULL");
    return 0;
  }
  TF_Buffer* answer = ask(PG_QUERY_OP_IS_STATEFUL, op_type, "TF_OpIsStateful", status);
  if (answer == NULL) return 0;
  int stateful = answer->length == 1 && ((const char*)answer->data)[0] == 1;
  TF_DeleteBuffer(answer);
  return stateful;
}

unsigned char TF_GetXlaAutoJitEnabled(void) { return 0; }
