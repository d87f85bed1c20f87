// opwire's copy of the PyTorch export schema (torch/_export/serde/export_schema.thrift).
// Wire-compatible with torch 2.13: same names, field ids, types, requiredness and enum values.
// tests/schema/test_idl_torch.py proves it contradicts torch's own IDL nowhere.
// Added here: doc comments, defaults torch's dataclasses declare, and the schema version.
// After editing, run: python -m opwire.schema.codegen

namespace py opwire.schema.export_schema

/** Major version of the export schema this file describes (torch 2.13 ships 8.20). */
const i64 SCHEMA_VERSION_MAJOR = 8
/** Minor version of the export schema this file describes. */
const i64 SCHEMA_VERSION_MINOR = 20

/** How an argument was passed at the call site. */
enum ArgumentKind {
  UNKNOWN = 0,
  POSITIONAL = 1,
  KEYWORD = 2,
}


/** Tensor layout, numbered as torch's export schema numbers it (not c10's numbering). */
enum Layout {
  Unknown = 0,
  SparseCoo = 1,
  SparseCsr = 2,
  SparseCsc = 3,
  SparseBsr = 4,
  SparseBsc = 5,
  _mkldnn = 6,
  Strided = 7,
}


/** Tensor memory format, numbered as torch's export schema numbers it (not c10's numbering). */
enum MemoryFormat {
  Unknown = 0,
  ContiguousFormat = 1,
  ChannelsLast = 2,
  ChannelsLast3d = 3,
  PreserveFormat = 4,
}


/** Tensor element type, numbered as torch's export schema numbers it: FLOAT is 7 here but c10's Double is 7. */
enum ScalarType {
  UNKNOWN = 0,
  BYTE = 1,
  CHAR = 2,
  SHORT = 3,
  INT = 4,
  LONG = 5,
  HALF = 6,
  FLOAT = 7,
  DOUBLE = 8,
  COMPLEXHALF = 9,
  COMPLEXFLOAT = 10,
  COMPLEXDOUBLE = 11,
  BOOL = 12,
  BFLOAT16 = 13,
  UINT16 = 28,
  FLOAT8E4M3FN = 29,
  FLOAT8E5M2 = 30,
  FLOAT8E4M3FNUZ = 31,
  FLOAT8E5M2FNUZ = 32,
  FLOAT8E8M0FNU = 33,
  UINT32 = 34,
  UINT64 = 35,
}


/** A device: type ('cpu', 'cuda', a renamed PrivateUse1 backend) and optional index. */
struct Device {
  10: string type;
  20: optional i64 index;
}

/** A concrete value observed for a symbolic expression at export time. */
union SymExprHint {
  10: i64 as_int;
  20: bool as_bool;
  30: double as_float;
}

/** A symbolic expression such as 's0 + s1', with an optional hint. */
struct SymExpr {
  10: string expr_str;
  20: optional SymExprHint hint;
}

/** An int that is either symbolic (an expression) or concrete. */
union SymInt {
  10: SymExpr as_expr;
  20: i64 as_int;
}

/** A float that is either symbolic (an expression) or concrete. */
union SymFloat {
  10: SymExpr as_expr;
  20: double as_float;
}

/** A bool that is either symbolic (an expression) or concrete. */
union SymBool {
  10: SymExpr as_expr;
  20: bool as_bool;
}

/** Metadata of a tensor value in a graph: dtype, shape, strides, device, layout. */
struct TensorMeta {
  10: ScalarType dtype;
  20: list<SymInt> sizes;
  30: bool requires_grad;
  40: Device device;
  50: list<SymInt> strides;
  60: SymInt storage_offset;
  70: Layout layout;
}

/** A SymInt argument: a named symbolic value or a concrete int (in mixed lists). */
union SymIntArgument {
  10: string as_name;
  20: i64 as_int;
}

/** A SymFloat argument: a named symbolic value or a concrete float (in mixed lists). */
union SymFloatArgument {
  10: string as_name;
  20: double as_float;
}

/** A SymBool argument: a named symbolic value or a concrete bool (in mixed lists). */
union SymBoolArgument {
  10: string as_name;
  20: bool as_bool;
}

/** A reference to a tensor value by its name in the graph. */
struct TensorArgument {
  10: string name;
}

/** A reference to an effect token by its name in the graph. */
struct TokenArgument {
  10: string name;
}

/** An element of a Tensor?[] list (or a Tensor? argument): a tensor or None. */
union OptionalTensorArgument {
  20: TensorArgument as_tensor;
  /** None (the bool value carries no meaning). */
  10: bool as_none;
}

/** A subgraph passed to a higher-order op (cond, map, while_loop, ...). */
struct GraphArgument {
  10: string name;
  20: Graph graph;
}

/** A reference to a TorchBind custom object by name and class. */
struct CustomObjArgument {
  10: string name;
  20: string class_fqn;
}

/** A complex number as two doubles. */
struct ComplexValue {
  10: double real;
  20: double imag;
}

/** One argument or output of a node: exactly one member is set. */
union Argument {
  /** None (the bool value carries no meaning). */
  10: bool as_none;
  20: TensorArgument as_tensor;
  30: list<TensorArgument> as_tensors;
  50: i64 as_int;
  70: list<i64> as_ints;
  80: double as_float;
  90: list<double> as_floats;
  100: string as_string;
  101: list<string> as_strings;
  110: SymIntArgument as_sym_int;
  120: list<SymIntArgument> as_sym_ints;
  130: ScalarType as_scalar_type;
  140: MemoryFormat as_memory_format;
  150: Layout as_layout;
  160: Device as_device;
  170: bool as_bool;
  180: list<bool> as_bools;
  182: SymBoolArgument as_sym_bool;
  184: list<SymBoolArgument> as_sym_bools;
  200: GraphArgument as_graph;
  190: list<OptionalTensorArgument> as_optional_tensors;
  210: CustomObjArgument as_custom_obj;
  220: string as_operator;
  230: SymFloatArgument as_sym_float;
  240: list<SymFloatArgument> as_sym_floats;
  250: OptionalTensorArgument as_optional_tensor;
  260: ComplexValue as_complex;
  270: list<list<TensorArgument>> as_nested_tensors;
  280: list<list<i64>> as_int_lists;
  290: map<string, Argument> as_string_to_argument;
  300: list<list<double>> as_float_lists;
}

/** An argument bound to an operator-schema argument name. */
struct NamedArgument {
  /** Argument name from the operator schema. */
  10: string name;
  20: Argument arg;
  30: optional ArgumentKind kind;
}

/** One call in a graph: target operator, named inputs, outputs and metadata. */
struct Node {
  10: string target;
  20: list<NamedArgument> inputs;
  30: list<Argument> outputs;
  40: map<string, string> metadata;
  50: optional bool is_hop_single_tensor_return;
  /** Node name; absent in files older than the field. */
  60: optional string name;
}

/** A graph: inputs, outputs, nodes, and the metadata of every value they name. */
struct Graph {
  10: list<Argument> inputs;
  20: list<Argument> outputs;
  30: list<Node> nodes;
  40: map<string, TensorMeta> tensor_values;
  50: map<string, SymInt> sym_int_values;
  60: map<string, SymBool> sym_bool_values;
  /** A subgraph of a higher-order op returns one tensor, not a one-element list. */
  70: bool is_single_tensor_return = false;
  80: map<string, CustomObjArgument> custom_obj_values = {};
  90: map<string, SymFloat> sym_float_values = {};
}

/** A graph input that the user passes (tensors and SymInts). */
struct UserInputSpec {
  10: Argument arg;
}

/** A constant graph input: none, int, float, string or bool. */
union ConstantValue {
  /** None (the bool value carries no meaning). */
  10: bool as_none;
  20: i64 as_int;
  30: double as_float;
  40: string as_string;
  50: bool as_bool;
}

/** A graph input bound to a constant value. */
struct InputToConstantInputSpec {
  10: string name;
  20: ConstantValue value;
}

/** A graph input bound to a parameter of the module. */
struct InputToParameterSpec {
  10: TensorArgument arg;
  20: string parameter_name;
}

/** A graph input bound to a buffer of the module. */
struct InputToBufferSpec {
  10: TensorArgument arg;
  20: string buffer_name;
  30: bool persistent;
}

/** A graph input bound to a tensor constant lifted from the module. */
struct InputToTensorConstantSpec {
  10: TensorArgument arg;
  20: string tensor_constant_name;
}

/** A graph input bound to a TorchBind custom object. */
struct InputToCustomObjSpec {
  10: CustomObjArgument arg;
  20: string custom_obj_name;
}

/** A graph input that carries an effect token. */
struct InputTokenSpec {
  10: TokenArgument arg;
}

/** What one graph input is bound to. */
union InputSpec {
  10: UserInputSpec user_input;
  20: InputToParameterSpec parameter;
  30: InputToBufferSpec buffer;
  40: InputToTensorConstantSpec tensor_constant;
  50: InputToCustomObjSpec custom_obj;
  70: InputTokenSpec token;
  60: InputToConstantInputSpec constant_input;
}

/** A graph output returned to the user. */
struct UserOutputSpec {
  10: Argument arg;
}

/** A graph output that is the loss of a joint graph. */
struct LossOutputSpec {
  10: TensorArgument arg;
}

/** A graph output that is written back to a buffer. */
struct BufferMutationSpec {
  10: TensorArgument arg;
  20: string buffer_name;
}

/** A graph output that is written back to a parameter. */
struct ParameterMutationSpec {
  10: TensorArgument arg;
  20: string parameter_name;
}

/** A graph output that is the gradient of a parameter. */
struct GradientToParameterSpec {
  10: TensorArgument arg;
  20: string parameter_name;
}

/** A graph output that is the gradient of a user input. */
struct GradientToUserInputSpec {
  10: TensorArgument arg;
  20: string user_input_name;
}

/** A graph output that is written back to a user input. */
struct UserInputMutationSpec {
  10: TensorArgument arg;
  20: string user_input_name;
}

/** A graph output that carries an effect token. */
struct OutputTokenSpec {
  10: TokenArgument arg;
}

/** What one graph output is. */
union OutputSpec {
  10: UserOutputSpec user_output;
  20: LossOutputSpec loss_output;
  30: BufferMutationSpec buffer_mutation;
  40: GradientToParameterSpec gradient_to_parameter;
  50: GradientToUserInputSpec gradient_to_user_input;
  60: UserInputMutationSpec user_input_mutation;
  70: OutputTokenSpec token;
  80: ParameterMutationSpec parameter_mutation;
}

/** How graph inputs and outputs map to user inputs, parameters, buffers and mutations. */
struct GraphSignature {
  10: list<InputSpec> input_specs;
  20: list<OutputSpec> output_specs;
}

/** The value range of a symbolic size; a missing bound is unbounded. */
struct RangeConstraint {
  10: optional i64 min_val;
  20: optional i64 max_val;
}

/** The calling convention of a submodule: flattened inputs/outputs and pytree specs. */
struct ModuleCallSignature {
  10: list<Argument> inputs;
  20: list<Argument> outputs;
  /** pytree TreeSpec of the inputs, as torch's treespec_dumps writes it. */
  30: string in_spec;
  /** pytree TreeSpec of the outputs, as torch's treespec_dumps writes it. */
  40: string out_spec;
  50: optional list<string> forward_arg_names;
}

/** One entry of the module call graph, for unflattening. */
struct ModuleCallEntry {
  10: string fqn;
  30: optional ModuleCallSignature signature;
}

/** The field names of a namedtuple type used in a pytree spec. */
struct NamedTupleDef {
  10: list<string> field_names;
}

/** The graph of an exported program with its signature and module call graph. */
struct GraphModule {
  10: Graph graph;
  50: GraphSignature signature;
  60: list<ModuleCallEntry> module_call_graph;
  40: map<string, string> metadata = {};
  70: map<string, NamedTupleDef> treespec_namedtuple_fields = {};
}

/** The schema version a file was written with: major breaks readers, minor adds to the schema. */
struct SchemaVersion {
  /** Bumped on every breaking change. */
  10: i64 major;
  /** Bumped on every compatible addition. */
  20: i64 minor;
}

/** A serialized torch.export.ExportedProgram (the models/model.json of a .pt2 archive). */
struct ExportedProgram {
  10: GraphModule graph_module;
  20: map<string, i64> opset_version;
  30: map<string, RangeConstraint> range_constraints;
  60: SchemaVersion schema_version;
  70: list<string> verifiers;
  80: string torch_version;
  90: list<string> guards_code;
}

/** Where one weight or constant lives in a .pt2 archive and how it is stored. */
struct PayloadMeta {
  10: string path_name;
  20: bool is_param;
  30: bool use_pickle;
  40: optional TensorMeta tensor_meta;
}

/** The weights/constants index of a .pt2 archive. */
struct PayloadConfig {
  10: map<string, PayloadMeta> config;
}

/** Metadata AOTInductor keeps for a compiled model. */
struct AOTInductorModelPickleData {
  1: string library_basename;
  2: list<string> input_names;
  3: list<string> output_names;
  4: optional i64 floating_point_input_dtype;
  5: optional i64 floating_point_output_dtype;
  6: optional bool aot_inductor_model_is_cpu;
}

/** A fallback kernel call of an AOTInductor-compiled model, run by the proxy executor. */
struct ExternKernelNode {
  10: string name;
  20: Node node;
}

/** All extern kernel calls of an AOTInductor-compiled model (<hash>.wrapper.json). */
struct ExternKernelNodes {
  10: list<ExternKernelNode> nodes;
}
