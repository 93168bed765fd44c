/* grappler.c: the functions of tensorflow/c/experimental/grappler/grappler.h a graph
 * optimizer calls on the host. pluggable runs no graphs, so it never hands an optimizer a
 * TF_GrapplerItem, and nothing here can have a graph to describe: each function sets
 * TF_UNIMPLEMENTED naming itself (or returns NULL where it has no status), so that a plugin
 * with an optimizer loads, and its TF_InitGraph is validated and listed
 * (src/pluggable/graph_optimizers.py). */
#include <stddef.h>

#include "tensorflow/c/experimental/grappler/grappler.h"

#define UNIMPLEMENTED(status, name) \
  TF_SetStatus((status), TF_UNIMPLEMENTED, \
               name " is not implemented by pluggable (it runs no graphs)")

void TF_GetNodesToPreserveListSize(const TF_GrapplerItem* item, int* num_values,
                                   size_t* storage_size, TF_Status* status) {
  (void)item;
  if (num_values != NULL) *num_values = 0;
  if (storage_size != NULL) *storage_size = 0;
  UNIMPLEMENTED(status, "TF_GetNodesToPreserveListSize");
}

void TF_GetNodesToPreserveList(const TF_GrapplerItem* item, char** values, size_t* lengths,
                               int num_values, void* storage, size_t storage_size,
                               TF_Status* status) {
  (void)item, (void)values, (void)lengths, (void)num_values, (void)storage, (void)storage_size;
  UNIMPLEMENTED(status, "TF_GetNodesToPreserveList");
}

void TF_GetFetchNodesListSize(const TF_GrapplerItem* item, int* num_values,
                              size_t* storage_size, TF_Status* status) {
  (void)item;
  if (num_values != NULL) *num_values = 0;
  if (storage_size != NULL) *storage_size = 0;
  UNIMPLEMENTED(status, "TF_GetFetchNodesListSize");
}

void TF_GetFetchNodesList(const TF_GrapplerItem* item, char** values, size_t* lengths,
                          int num_values, void* storage, size_t storage_size,
                          TF_Status* status) {
  (void)item, (void)values, (void)lengths, (void)num_values, (void)storage, (void)storage_size;
  UNIMPLEMENTED(status, "TF_GetFetchNodesList");
}

/* No status to report through: NULL, which every TF_GraphProperties function accepts. */
TF_GraphProperties* TF_NewGraphProperties(const TF_GrapplerItem* item) {
  (void)item;
  return NULL;
}

void TF_DeleteGraphProperties(TF_GraphProperties* graph_properties) { (void)graph_properties; }

void TF_InferStatically(TF_GraphProperties* graph_properties, TF_Bool assume_valid_feeds,
                        TF_Bool aggressive_shape_inference, TF_Bool include_input_tensor_values,
                        TF_Bool include_output_tensor_values, TF_Status* s) {
  (void)graph_properties, (void)assume_valid_feeds, (void)aggressive_shape_inference;
  (void)include_input_tensor_values, (void)include_output_tensor_values;
  UNIMPLEMENTED(s, "TF_InferStatically");
}

void TF_GetInputPropertiesListSize(TF_GraphProperties* graph_properties, const char* name,
                                   int* num_values, TF_Status* status) {
  (void)graph_properties, (void)name;
  if (num_values != NULL) *num_values = 0;
  UNIMPLEMENTED(status, "TF_GetInputPropertiesListSize");
}

void TF_GetOutputPropertiesListSize(TF_GraphProperties* graph_properties, const char* name,
                                    int* num_values, TF_Status* status) {
  (void)graph_properties, (void)name;
  if (num_values != NULL) *num_values = 0;
  UNIMPLEMENTED(status, "TF_GetOutputPropertiesListSize");
}

void TF_GetInputPropertiesList(TF_GraphProperties* graph_properties, const char* name,
                               TF_Buffer** properties, int num_values, TF_Status* status) {
  (void)graph_properties, (void)name, (void)properties, (void)num_values;
  UNIMPLEMENTED(status, "TF_GetInputPropertiesList");
}

void TF_GetOutputPropertiesList(TF_GraphProperties* graph_properties, const char* name,
                                TF_Buffer** properties, int num_values, TF_Status* status) {
  (void)graph_properties, (void)name, (void)properties, (void)num_values;
  UNIMPLEMENTED(status, "TF_GetOutputPropertiesList");
}

TF_FunctionLibraryDefinition* TF_NewFunctionLibraryDefinition(const TF_Buffer* graph_buf,
                                                              TF_Status* status) {
  (void)graph_buf;
  UNIMPLEMENTED(status, "TF_NewFunctionLibraryDefinition");
  return NULL;
}

void TF_DeleteFunctionLibraryDefinition(TF_FunctionLibraryDefinition* fn_lib) { (void)fn_lib; }

void TF_LookUpOpDef(TF_FunctionLibraryDefinition* fn_lib, const char* name, TF_Buffer* buf,
                    TF_Status* s) {
  (void)fn_lib, (void)name, (void)buf;
  UNIMPLEMENTED(s, "TF_LookUpOpDef");
}
