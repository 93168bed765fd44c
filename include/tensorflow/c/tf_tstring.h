/* tensorflow/c/tf_tstring.h: the string element of TF_STRING tensors (TF_TString, declared in
 * tensorflow/core/platform/ctstring.h) and the exported functions that create, read and free
 * one. Each tensor element of type TF_STRING is one TF_TString (24 bytes); a tensor of
 * strings owns what its elements point to, so a plugin frees an element it initialised with
 * TF_StringDealloc. Declarations match TensorFlow 2.21. */
#ifndef TENSORFLOW_C_TF_TSTRING_H_
#define TENSORFLOW_C_TF_TSTRING_H_

#include "tensorflow/c/c_api_macros.h"
#include "tensorflow/c/tf_tensor.h"
#include "tensorflow/core/platform/ctstring.h"

#ifdef __cplusplus
extern "C" {
#endif

/* An empty string (no allocation). Call before any other function on fresh memory. */
TF_CAPI_EXPORT extern void TF_StringInit(TF_TString *t);
/* `dst` becomes a copy of the `size` bytes at `src` (owned by `dst`). */
TF_CAPI_EXPORT extern void TF_StringCopy(TF_TString *dst, const char *src,
                                         size_t size);
/* `dst` refers to the `size` bytes at `src` without copying; they must outlive `dst`. */
TF_CAPI_EXPORT extern void TF_StringAssignView(TF_TString *dst, const char *src,
                                               size_t size);
/* The bytes (not necessarily NUL-terminated for a view). */
TF_CAPI_EXPORT extern const char *TF_StringGetDataPointer(
    const TF_TString *tstr);
/* How the string is stored: small, large, offset or view. */
TF_CAPI_EXPORT extern TF_TString_Type TF_StringGetType(const TF_TString *str);
/* Length in bytes. */
TF_CAPI_EXPORT extern size_t TF_StringGetSize(const TF_TString *tstr);
/* Bytes that fit without reallocating (0 for views and offsets). */
TF_CAPI_EXPORT extern size_t TF_StringGetCapacity(const TF_TString *str);
/* Frees what the string owns and leaves it empty. */
TF_CAPI_EXPORT extern void TF_StringDealloc(TF_TString *tstr);

#ifdef __cplusplus
}
#endif

#endif
