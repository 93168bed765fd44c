/* tensorflow/c/logging.h: a plugin's log lines, through its host's logging.
 *
 * TF_Log writes one line at a severity; TF_VLog writes it when verbose logging of at least
 * that level is on (TF_CPP_MAX_VLOG_LEVEL, as in TensorFlow); TF_DVLog is TF_VLog of debug
 * builds and writes nothing in release builds, as TensorFlow's. `fmt` is a printf format.
 * TF_FATAL ends the process after the line is written: a plugin may rely on TF_Log(TF_FATAL)
 * not returning.
 *
 * In pluggable each line goes to Python's `logging`, logger "pluggable.plugin", prefixed
 * with the file name of the library that wrote it (include/ABI.md, "Logging").
 */
#ifndef TENSORFLOW_C_LOGGING_H_
#define TENSORFLOW_C_LOGGING_H_

#include "tensorflow/c/c_api.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum TF_LogLevel {
  TF_INFO = 0,
  TF_WARNING = 1,
  TF_ERROR = 2,
  TF_FATAL = 3,
} TF_LogLevel;

TF_CAPI_EXPORT extern void TF_Log(TF_LogLevel level, const char* fmt, ...);
TF_CAPI_EXPORT extern void TF_VLog(int level, const char* fmt, ...);
TF_CAPI_EXPORT extern void TF_DVLog(int level, const char* fmt, ...);

#ifdef __cplusplus
}
#endif

#endif /* TENSORFLOW_C_LOGGING_H_ */
