/* tensorflow/c/tf_buffer.h: TF_Buffer, a byte block with an optional deallocator.
 *
 * Used by the kernel API to pass serialized protocol buffers (NodeDef, ConfigProto, ...).
 * A TF_Buffer does not own `data` unless `data_deallocator` is set; TF_DeleteBuffer calls
 * `data_deallocator(data, length)` when it is.
 */
#ifndef TENSORFLOW_C_TF_BUFFER_H_
#define TENSORFLOW_C_TF_BUFFER_H_

#include <stddef.h>

#include "tensorflow/c/c_api_macros.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct TF_Buffer {
  const void* data;
  size_t length;
  void (*data_deallocator)(void* data, size_t length); /* [Optional] NULL: not owned */
} TF_Buffer;

/* A buffer holding a copy of proto[0, proto_len), freed with the buffer. */
TF_CAPI_EXPORT extern TF_Buffer* TF_NewBufferFromString(const void* proto,
                                                        size_t proto_len);

/* An empty buffer, for a callee to fill. */
TF_CAPI_EXPORT extern TF_Buffer* TF_NewBuffer(void);

TF_CAPI_EXPORT extern void TF_DeleteBuffer(TF_Buffer*);

/* A copy of the struct itself (the data is shared, not copied). */
TF_CAPI_EXPORT extern TF_Buffer TF_GetBuffer(TF_Buffer* buffer);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* TENSORFLOW_C_TF_BUFFER_H_ */
