/* xla/tsl/c/tsl_status.h: the status type and error codes beneath TF_Status.
 *
 * tensorflow/c/tf_status.h builds TF_Status and TF_Code on these, as TensorFlow 2.21 does, so
 * TF_Status is `struct TSL_Status` and TF_Code is TSL_Code. Code values are the canonical
 * error codes (error_codes.proto) and never change.
 *
 * The TSL_* functions are declared for source compatibility only: the pluggable host runtime
 * exports the TF_* functions of tf_status.h, and plugins should call those.
 */
#ifndef XLA_TSL_C_TSL_STATUS_H_
#define XLA_TSL_C_TSL_STATUS_H_

#ifdef __cplusplus
extern "C" {
#endif

/* Opaque; created and owned by whoever calls TSL_NewStatus / TF_NewStatus. */
typedef struct TSL_Status TSL_Status;

typedef enum TSL_Code {
  TSL_OK = 0,
  TSL_CANCELLED = 1,
  TSL_UNKNOWN = 2,
  TSL_INVALID_ARGUMENT = 3,
  TSL_DEADLINE_EXCEEDED = 4,
  TSL_NOT_FOUND = 5,
  TSL_ALREADY_EXISTS = 6,
  TSL_PERMISSION_DENIED = 7,
  TSL_UNAUTHENTICATED = 16,
  TSL_RESOURCE_EXHAUSTED = 8,
  TSL_FAILED_PRECONDITION = 9,
  TSL_ABORTED = 10,
  TSL_OUT_OF_RANGE = 11,
  TSL_UNIMPLEMENTED = 12,
  TSL_INTERNAL = 13,
  TSL_UNAVAILABLE = 14,
  TSL_DATA_LOSS = 15,
} TSL_Code;

extern TSL_Status* TSL_NewStatus(void);

extern void TSL_DeleteStatus(TSL_Status*);

/* Replaces code and message; `msg` is copied. */
extern void TSL_SetStatus(TSL_Status* s, TSL_Code code, const char* msg);

/* Adds or replaces the payload under `key`; ignored while the status is OK. */
extern void TSL_SetPayload(TSL_Status* s, const char* key, const char* value);

/* Called once per payload; `key` and `value` are valid only during the call. */
typedef void (*TSL_PayloadVisitor)(const char* key, const char* value,
                                   void* capture);
extern void TSL_ForEachPayload(const TSL_Status* s, TSL_PayloadVisitor visitor,
                               void* capture);

/* Sets the status from an errno value, with `context` in the message. */
extern void TSL_SetStatusFromIOError(TSL_Status* s, int error_code,
                                     const char* context);

extern TSL_Code TSL_GetCode(const TSL_Status* s);

/* The message, "" when OK; valid until the status is next changed. */
extern const char* TSL_Message(const TSL_Status* s);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* XLA_TSL_C_TSL_STATUS_H_ */
