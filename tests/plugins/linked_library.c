/* A small shared library for the dependency-tree tests (tests/loader/test_dependencies.py),
 * built as the libraries a plugin needs:
 *   (default)             a library with one function;
 *   -DUSES_MISSING_API    it also calls C API functions no host provides (TF_NotAFunction,
 *                         TFE_NewOp), left undefined in the library;
 *   -DCRASH_IN_CONSTRUCTOR its initialiser crashes when the library is loaded. */
#include <signal.h>

int linked_library_answer(void);
int linked_library_answer(void) { return 42; }

#ifdef USES_MISSING_API
void TF_NotAFunction(void);
void* TFE_NewOp(void* context, const char* name, void* status);
void linked_library_calls_the_api(void);
void linked_library_calls_the_api(void) {
  TF_NotAFunction();
  (void)TFE_NewOp(0, "Add", 0);
}
#endif

#ifdef CRASH_IN_CONSTRUCTOR
__attribute__((constructor)) static void crash_on_load(void) { raise(SIGSEGV); }
#endif
