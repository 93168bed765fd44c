/* tensorflow/c/tf_status.h: TF_Status, the success-or-error record passed through every call.
 *
 * Ownership: whoever creates a status deletes it. The host creates the statuses it hands to
 * plugin callbacks; a plugin reports failure by TF_SetStatus on the status it was given and
 * never deletes it. A status handed in is OK on entry.
 *
 * TF_Code is TSL_Code (xla/tsl/c/tsl_status.h); the TF_* code names are aliases of the TSL_*
 * enumerators, as in TensorFlow 2.21.
 */
#ifndef TENSORFLOW_C_TF_STATUS_H_
#define TENSORFLOW_C_TF_STATUS_H_

#include "tensorflow/c/c_api_macros.h"
#include "xla/tsl/c/tsl_status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct TSL_Status TF_Status;

typedef TSL_Code TF_Code;
#define TF_OK TSL_OK
#define TF_CANCELLED TSL_CANCELLED
#define TF_UNKNOWN TSL_UNKNOWN
#define TF_INVALID_ARGUMENT TSL_INVALID_ARGUMENT
#define TF_DEADLINE_EXCEEDED TSL_DEADLINE_EXCEEDED
#define TF_NOT_FOUND TSL_NOT_FOUND
#define TF_ALREADY_EXISTS TSL_ALREADY_EXISTS
#define TF_PERMISSION_DENIED TSL_PERMISSION_DENIED
#define TF_UNAUTHENTICATED TSL_UNAUTHENTICATED
#define TF_RESOURCE_EXHAUSTED TSL_RESOURCE_EXHAUSTED
#define TF_FAILED_PRECONDITION TSL_FAILED_PRECONDITION
#define TF_ABORTED TSL_ABORTED
#define TF_OUT_OF_RANGE TSL_OUT_OF_RANGE
#define TF_UNIMPLEMENTED TSL_UNIMPLEMENTED
#define TF_INTERNAL TSL_INTERNAL
#define TF_UNAVAILABLE TSL_UNAVAILABLE
#define TF_DATA_LOSS TSL_DATA_LOSS

/* A new OK status; release it with TF_DeleteStatus. */
TF_CAPI_EXPORT extern TF_Status* TF_NewStatus(void);

TF_CAPI_EXPORT extern void TF_DeleteStatus(TF_Status*);

/* Replaces code and message (copied). TF_SetStatus(s, TF_OK, "") resets a status. */
TF_CAPI_EXPORT extern void TF_SetStatus(TF_Status* s, TF_Code code,
                                        const char* msg);

/* Adds or replaces the payload under `key` (both copied); ignored while the status is OK. */
TF_CAPI_EXPORT void TF_SetPayload(TF_Status* s, const char* key,
                                  const char* value);

/* Calls `visitor(key, value, capture)` once per payload; the strings are valid only during
 * the call. */
#define TF_PayloadVisitor TSL_PayloadVisitor
TF_CAPI_EXPORT extern void TF_ForEachPayload(const TF_Status* s,
                                             TF_PayloadVisitor visitor,
                                             void* capture);

/* Sets the code matching errno value `error_code`, with `context` in the message. */
TF_CAPI_EXPORT extern void TF_SetStatusFromIOError(TF_Status* s, int error_code,
                                                   const char* context);

TF_CAPI_EXPORT extern TF_Code TF_GetCode(const TF_Status* s);

/* The message, "" when OK. Owned by the status; valid until the status is next changed. */
TF_CAPI_EXPORT extern const char* TF_Message(const TF_Status* s);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* TENSORFLOW_C_TF_STATUS_H_ */
