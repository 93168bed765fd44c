/* tensorflow/c/c_api.h: the part of TensorFlow's graph and session C API that plugin headers
 * use. TensorFlow's c_api.h declares the whole client API (graphs, sessions, functions);
 * pluggable runs no graphs and sessions, so this header keeps only what kernels.h and
 * experimental/grappler/grappler.h need, with TensorFlow 2.21's layouts, and includes the
 * same headers TensorFlow's does, so that a plugin relying on them transitively still
 * builds. A plugin that calls TensorFlow's client API must be built against TensorFlow.
 * include/ABI.md ("Deviations") lists what is left out. */
#ifndef TENSORFLOW_C_C_API_H_
#define TENSORFLOW_C_C_API_H_

#include <stddef.h>
#include <stdint.h>

#include "tensorflow/c/c_api_macros.h"
#include "tensorflow/c/tf_attrtype.h"
#include "tensorflow/c/tf_buffer.h"
#include "tensorflow/c/tf_datatype.h"
#include "tensorflow/c/tf_status.h"
#include "tensorflow/c/tf_tensor.h"
#include "tensorflow/c/tf_tstring.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A borrowed string: `data` is not NUL-terminated and the receiver does not free it. */
typedef struct TF_StringView {
  const char* data;
  size_t len;
} TF_StringView;

#ifdef __cplusplus
}
#endif

#endif
