/* The host tracer's /host:CPU plane, encoded from its records. */
#include "fast_internal.h"

PyMethodDef pg_hostplane_methods[] = {{NULL, NULL, 0, NULL}};

int pg_hostplane_init(PyObject* module) {
  (void)module;
  return 0;
}
