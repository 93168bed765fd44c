/* tensorflow/c/experimental/grappler/grappler.h: graph optimizers in plugins (TensorFlow's
 * "pluggable graph optimizer", RFC 318). A plugin exports TF_InitGraph, which fills
 * TP_OptimizerRegistrationParams: the device type its optimizer serves, which of
 * TensorFlow's own optimizers to turn on or off (TP_OptimizerConfigs), and the optimizer's
 * callbacks (TP_Optimizer). The optimizer receives a serialized GraphDef and writes the
 * optimized one; the TF_GrapplerItem functions describe the graph it got.
 *
 * Conventions as in stream_executor.h: every struct starts with struct_size (both sides set
 * it, *_STRUCT_SIZE) and ext; TP_ structs are filled by the plugin. Declarations match
 * TensorFlow 2.21. pluggable runs no graphs: it calls TF_InitGraph, validates and lists the
 * optimizer, and never calls optimize_func; the TF_GrapplerItem, graph-properties and
 * function-library functions exist for linking and set TF_UNIMPLEMENTED naming themselves. */
#ifndef TENSORFLOW_C_EXPERIMENTAL_GRAPPLER_GRAPPLER_H_
#define TENSORFLOW_C_EXPERIMENTAL_GRAPPLER_GRAPPLER_H_

#include <stddef.h>
#include <stdint.h>

#include "tensorflow/c/c_api.h"
#include "tensorflow/c/c_api_macros.h"
#include "tensorflow/c/tf_buffer.h"
#include "tensorflow/c/tf_status.h"

/* The version of this API; a plugin with another major version is rejected. */
#define GO_MAJOR 0
#define GO_MINOR 0
#define GO_PATCH 1

#ifdef __cplusplus
extern "C" {
#endif

/* Leave TensorFlow's choice (default), or force an optimizer off or on. */
typedef enum TF_TriState {
  TF_TriState_Default = 0,
  TF_TriState_Off,
  TF_TriState_On,
} TF_TriState;

/* The graph handed to an optimizer, with its fetch nodes and nodes to preserve. */
typedef struct TF_GrapplerItem TF_GrapplerItem;

/* Which of TensorFlow's own graph optimizers run when this plugin's device is used. */
typedef struct TP_OptimizerConfigs {
  size_t struct_size;
  void* ext;
  TF_TriState disable_model_pruning;
  TF_TriState implementation_selector;
  TF_TriState function_optimization;
  TF_TriState common_subgraph_elimination;
  TF_TriState arithmetic_optimization;
  TF_TriState debug_stripper;
  TF_TriState constant_folding;
  TF_TriState shape_optimization;
  TF_TriState auto_mixed_precision;
  TF_TriState auto_mixed_precision_onednn_bfloat16;
  TF_TriState auto_mixed_precision_mkl;
  TF_TriState pin_to_host_optimization;
  TF_TriState layout_optimizer;
  TF_TriState remapping;
  TF_TriState loop_optimization;
  TF_TriState dependency_optimization;
  TF_TriState auto_parallel;
  TF_TriState memory_optimization;
  TF_TriState scoped_allocator_optimization;
} TP_OptimizerConfigs;

#define TP_OPTIMIZER_CONFIGS_STRUCT_SIZE \
  TF_OFFSET_OF_END(TP_OptimizerConfigs, scoped_allocator_optimization)

/* The optimizer: create_func makes its state, optimize_func turns the serialized GraphDef
 * it gets into the optimized one, destroy_func frees the state. */
typedef struct TP_Optimizer {
  size_t struct_size;
  void* ext;
  /* [Optional] Without it the state is NULL. */
  void* (*create_func)(void);
  void (*optimize_func)(void*, const TF_Buffer*, const TF_GrapplerItem*,
                        TF_Buffer*, TF_Status*);
  /* [Optional] */
  void (*destroy_func)(void*);
} TP_Optimizer;

#define TP_OPTIMIZER_STRUCT_SIZE TF_OFFSET_OF_END(TP_Optimizer, destroy_func)

/* Handed to TF_InitGraph: the host sets struct_size, the versions and the two output
 * pointers; the plugin sets device_type and fills *optimizer_configs and *optimizer. */
typedef struct TP_OptimizerRegistrationParams {
  size_t struct_size;
  void* ext;
  int32_t major_version;
  int32_t minor_version;
  int32_t patch_version;
  const char* device_type;                /* set by the plugin */
  TP_OptimizerConfigs* optimizer_configs; /* filled by the plugin */
  TP_Optimizer* optimizer;                /* filled by the plugin */
} TP_OptimizerRegistrationParams;

#define TP_OPTIMIZER_REGISTRATION_PARAMS_STRUCT_SIZE \
  TF_OFFSET_OF_END(TP_OptimizerRegistrationParams, optimizer)

/* The plugin's entry point (exported by the plugin, not by the host). */
void TF_InitGraph(TP_OptimizerRegistrationParams* params, TF_Status* status);

/* The graph's nodes to preserve, in two calls: the count and bytes needed, then the names
 * into `storage` (values[i] points into it, lengths[i] its length). */
TF_CAPI_EXPORT extern void TF_GetNodesToPreserveListSize(
    const TF_GrapplerItem* item, int* num_values, size_t* storage_size,
    TF_Status* status);
TF_CAPI_EXPORT extern void TF_GetNodesToPreserveList(
    const TF_GrapplerItem* item, char** values, size_t* lengths, int num_values,
    void* storage, size_t storage_size, TF_Status* status);
/* The fetch nodes, the same way. */
TF_CAPI_EXPORT extern void TF_GetFetchNodesListSize(const TF_GrapplerItem* item,
                                                    int* num_values,
                                                    size_t* storage_size,
                                                    TF_Status* status);
TF_CAPI_EXPORT extern void TF_GetFetchNodesList(const TF_GrapplerItem* item,
                                                char** values, size_t* lengths,
                                                int num_values, void* storage,
                                                size_t storage_size,
                                                TF_Status* status);

/* Static shape and type information about a graph's tensors. */
typedef struct TF_GraphProperties TF_GraphProperties;

TF_CAPI_EXPORT extern TF_GraphProperties* TF_NewGraphProperties(
    const TF_GrapplerItem* item);
TF_CAPI_EXPORT extern void TF_DeleteGraphProperties(
    TF_GraphProperties* graph_properties);
TF_CAPI_EXPORT extern void TF_InferStatically(
    TF_GraphProperties* graph_properties, TF_Bool assume_valid_feeds,
    TF_Bool aggressive_shape_inference, TF_Bool include_input_tensor_values,
    TF_Bool include_output_tensor_values, TF_Status* s);
TF_CAPI_EXPORT extern void TF_GetInputPropertiesListSize(
    TF_GraphProperties* graph_properties, const char* name, int* num_values,
    TF_Status* status);
TF_CAPI_EXPORT extern void TF_GetOutputPropertiesListSize(
    TF_GraphProperties* graph_properties, const char* name, int* num_values,
    TF_Status* status);
/* Serialized OpInfo.TensorProperties protos, one TF_Buffer each. */
TF_CAPI_EXPORT extern void TF_GetInputPropertiesList(
    TF_GraphProperties* graph_properties, const char* name,
    TF_Buffer** properties, int num_values, TF_Status* status);
TF_CAPI_EXPORT extern void TF_GetOutputPropertiesList(
    TF_GraphProperties* graph_properties, const char* name,
    TF_Buffer** properties, int num_values, TF_Status* status);

/* The ops and functions a graph may use. */
typedef struct TF_FunctionLibraryDefinition TF_FunctionLibraryDefinition;

TF_CAPI_EXPORT extern TF_FunctionLibraryDefinition*
TF_NewFunctionLibraryDefinition(const TF_Buffer* graph_buf, TF_Status* status);
TF_CAPI_EXPORT extern void TF_DeleteFunctionLibraryDefinition(
    TF_FunctionLibraryDefinition* fn_lib);
/* The serialized OpDef of `name` into `buf`. */
TF_CAPI_EXPORT extern void TF_LookUpOpDef(TF_FunctionLibraryDefinition* fn_lib,
                                          const char* name, TF_Buffer* buf,
                                          TF_Status* s);

#ifdef __cplusplus
}
#endif

#endif
