/* Runs remembered ops (dispatch's plans) in one call. */
#include "fast_internal.h"

PyMethodDef pg_oprun_methods[] = {{NULL, NULL, 0, NULL}};

int pg_oprun_init(PyObject* module) {
  (void)module;
  return 0;
}
