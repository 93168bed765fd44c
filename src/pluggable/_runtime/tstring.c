/* tstring.c: tensorflow/c/tf_tstring.h, the exported functions over TF_TString elements.
 * Each one is the inline function of tensorflow/core/platform/ctstring_internal.h of the same
 * meaning, so that a plugin built against either gets the same bytes. */
#include "tensorflow/c/tf_tstring.h"

void TF_StringInit(TF_TString *t) { TF_TString_Init(t); }

void TF_StringCopy(TF_TString *dst, const char *src, size_t size) {
  TF_TString_Copy(dst, src, size);
}

void TF_StringAssignView(TF_TString *dst, const char *src, size_t size) {
  TF_TString_AssignView(dst, src, size);
}

const char *TF_StringGetDataPointer(const TF_TString *tstr) {
  return TF_TString_GetDataPointer(tstr);
}

TF_TString_Type TF_StringGetType(const TF_TString *str) { return TF_TString_GetType(str); }

size_t TF_StringGetSize(const TF_TString *tstr) { return TF_TString_GetSize(tstr); }

size_t TF_StringGetCapacity(const TF_TString *str) { return TF_TString_GetCapacity(str); }

void TF_StringDealloc(TF_TString *tstr) { TF_TString_Dealloc(tstr); }
