// opwire's own records, built on the export schema. Compatibility rules: README.md beside this file.
// After editing, run: python -m opwire.schema.codegen

include "export_schema.thrift"

namespace py opwire.schema.opwire

/** Major version of opwire's own records. */
const i64 RECORDS_VERSION_MAJOR = 1
/** Minor version of opwire's own records. */
const i64 RECORDS_VERSION_MINOR = 9

/** Summary of a tensor kept instead of its bytes (record with outputs="digest"). */
struct TensorDigest {
  /** SHA-256 of the row-major element bytes (little-endian), hex. */
  10: string sha256;
  /** Smallest element (as double); absent for empty, bool or complex tensors. */
  20: optional double min;
  /** Largest element (as double); absent for empty, bool or complex tensors. */
  30: optional double max;
  /** Mean of the elements (as double); absent for empty, bool or complex tensors. */
  40: optional double mean;
  /** Number of NaN elements. */
  50: i64 nan_count;
  /** Number of infinite elements. */
  60: i64 inf_count;
}

/** A tensor with its data: metadata plus the element bytes. */
struct TensorValue {
  /** Element type, in the export schema's numbering. */
  10: export_schema.ScalarType dtype;
  /** Shape. */
  20: list<i64> sizes;
  /** Strides in elements, restored on load. */
  30: list<i64> strides;
  /** Offset in elements into the storage, restored on load. */
  40: i64 storage_offset;
  /** Device the tensor lived on when written. */
  50: export_schema.Device device;
  /** Whether the tensor required grad. */
  60: bool requires_grad;
  /** Zero bytes (at most 63) written only so that `data`'s bytes start at a file offset that is a multiple of 64: set by opwire's Thrift writer on the tensors of an OpwireArchive's weights and constants, never elsewhere nor in JSON; readers drop it (and refuse it anywhere else). Since 1.7. */
  65: optional binary padding;
  /** Elements in row-major (contiguous) order, little-endian; empty when only a digest was kept. */
  70: binary data;
  /** Present when the bytes were not kept (digest mode); data is then empty. */
  80: optional TensorDigest digest;
  /** Layout; absent means strided. */
  90: optional export_schema.Layout layout;
}

/** A concrete value: an input to `opwire run`/`exec` or an example input. Exactly one member is set. */
union Value {
  /** A tensor with data. */
  10: TensorValue as_tensor;
  /** An integer. */
  20: i64 as_int;
  /** A double. */
  30: double as_float;
  /** A bool. */
  40: bool as_bool;
  /** A string. */
  50: string as_string;
  /** A complex number. */
  60: export_schema.ComplexValue as_complex;
  /** None (the bool value carries no meaning). */
  70: bool as_none;
  /** A device. */
  80: export_schema.Device as_device;
  /** A dtype. */
  90: export_schema.ScalarType as_scalar_type;
  /** A layout. */
  100: export_schema.Layout as_layout;
  /** A memory format. */
  110: export_schema.MemoryFormat as_memory_format;
  /** A list (or tuple) of values. */
  120: list<Value> as_list;
  /** A string-keyed dict of values. */
  130: map<string, Value> as_dict;
}

/** Named values: the inputs file of `opwire run` and `opwire exec`. */
struct Values {
  /** Value per name (graph input names, tensor names or sym-int names). */
  10: map<string, Value> values;
}

/** A pickle-free archive: an exported program with its weights and constants. */
struct OpwireArchive {
  /** The program, as torch serializes it. */
  10: export_schema.ExportedProgram program;
  /** Parameters and buffers by their state_dict name. */
  20: map<string, TensorValue> weights;
  /** Tensor constants lifted from the module, by name. */
  30: map<string, TensorValue> constants;
  /** Example positional inputs, if the program kept them. */
  40: optional list<Value> example_args;
  /** Example keyword inputs, if the program kept them. */
  50: optional map<string, Value> example_kwargs;
  /** opwire version that wrote the archive. */
  60: string opwire_version;
}

/** One recorded operator call. */
struct CallRecord {
  /** Operator as "namespace::name.overload". */
  10: string target;
  /** Arguments bound by name through the op schema; tensors refer to CallTrace.tensors by name. */
  20: list<export_schema.NamedArgument> inputs;
  /** Returns in schema order; tensors refer to CallTrace.tensors by name. */
  30: list<export_schema.Argument> outputs;
  /** Free-form annotations (e.g. the Python stack). */
  40: map<string, string> metadata;
}

/** What a trace was recorded with. */
struct TraceHeader {
  /** opwire version that recorded the trace. */
  10: string opwire_version;
  /** torch.__version__ at recording time. */
  20: string torch_version;
  /** Schema string of every op used, keyed by "namespace::name.overload". */
  30: map<string, string> op_schemas;
  /** "full" (output bytes kept) or "digest" (output digests only). */
  40: string outputs_mode;
  /** Export schema version of the records. */
  50: export_schema.SchemaVersion schema_version;
  /** Where this trace sits in a distributed run (absent for a single-process trace). Since records 1.2. */
  60: optional TraceDistributed distributed;
}

/** A process group that a recorded call used: a reference that replay and `opwire ranks` resolve, never a pickled object. */
struct TraceProcessGroup {
  /** torch's group name (`"0"` for the default group; what functional collectives pass as `group_name`). */
  10: string name;
  /** Global ranks of the group's members, in group-rank order. */
  20: list<i64> ranks;
  /** Backend name (`gloo`, `nccl`, ...). */
  30: string backend;
}

/** A rank's place in a distributed run, taken from the launcher's environment (RANK, WORLD_SIZE, TORCHELASTIC_RUN_ID). */
struct TraceDistributed {
  /** Global rank of the recorded process. */
  10: i64 rank;
  /** Number of ranks of the run. */
  20: i64 world_size;
  /** The launcher's run id (TORCHELASTIC_RUN_ID; empty when the launcher set none). */
  30: string run_id;
  /** Every process group a recorded call used, in the order first used (streamed traces carry them as group frames). */
  40: list<TraceProcessGroup> groups;
}

/** One finding of `opwire ranks`: ranks that disagree on a collective. */
struct RanksFinding {
  /** "sequence" (a different collective, shape or dtype at the same place of a group) or "numeric" (outputs that do not follow from all ranks' inputs). */
  10: string kind;
  /** Process group name. */
  20: string group;
  /** Position of the collective in the group's sequence (0-based). */
  30: i64 seq;
  /** The op of the first rank that disagrees (as "ns::op.overload"; empty when that rank's sequence ended). */
  40: string op;
  /** The ranks that disagree with the majority (sequence) or whose outputs are wrong (numeric), first one first. */
  50: list<i64> ranks;
  /** Call index in each rank's trace of the collective at this position, in global-rank order (-1: none). */
  60: list<i64> calls;
  /** What differs. */
  70: string detail;
  /** Source line of the first disagreeing rank's call. */
  80: string source;
  /** Module path of the first disagreeing rank's call. */
  90: string module_path;
}

/** What `opwire ranks --json` prints. */
struct RanksReport {
  /** The run id the ranks share. */
  10: string run_id;
  /** Number of ranks. */
  20: i64 world_size;
  /** The process groups the run used. */
  30: list<TraceProcessGroup> groups;
  /** Collectives checked (each counted once per group position). */
  40: i64 collectives;
  /** Findings, earliest first; empty when the ranks agree. */
  50: list<RanksFinding> findings;
}

/** How one output differs from its reference: a node's from the saved run (`opwire run --compare-nodes`), a replayed call's from the recording. Since 1.3. */
struct NodeDifference {
  /** The output's name in the graph (node comparison) or "output 0" / "argument self (written in place)" (replay). */
  10: string output;
  /** "shape", "dtype", "stride", "value" or "missing". */
  20: string kind;
  /** Largest absolute difference, for value differences. */
  30: optional double max_diff;
  /** Largest relative difference, for value differences. */
  40: optional double max_rel;
  /** Index of the element with the largest difference. */
  50: optional list<i64> where;
  /** The output's shape in this run (node comparison). */
  60: optional list<i64> shape;
}

/** One finding of op validation, node comparison or replay: a catalog code (docs/errors.md), about an op or a node (a bc-check change, BcCheckChange, has the same first five fields). Since 1.3. */
struct Finding {
  /** Stable catalog code, lower case (opwire.validation.CODES). */
  10: string code;
  /** "error", "warning", "info", or "ok" (a node that matches the saved run). */
  20: string severity;
  /** The op it is about, as "ns::op.overload" (or torch's "torch.ops.ns.op.overload"); empty when it is about a node. */
  30: string op = "";
  /** What was found. */
  40: string message;
  /** What to do about it (empty when nothing is to be done). */
  50: string fix = "";
  /** The top-level node it is about (node comparison); absent when it is about an op. */
  60: optional string node;
  /** How the outputs differ from their reference (node comparison, replay mismatches). */
  70: optional list<NodeDifference> differences;
  /** Where a difference comes from: "local" (the node or call itself computes differently), "inherited" (it received inputs that already differed) or "inherited from rank N"; absent when not labelled. Since 1.6. */
  80: optional string origin;
}

/** A findings document: what `opwire run --compare-nodes --findings` writes and `opwire view --findings` reads (docs/view.md). Since 1.3. */
struct FindingsDocument {
  /** Format version of findings documents: 2 (version 1 documents, with `status` for severity, are still read). */
  10: i64 opwire_findings;
  /** Title the page shows. */
  20: string title = "";
  /** The first node whose outputs differ from the saved run (or where the run failed); absent when none. */
  30: optional string first_divergence;
  /** The findings, in node order. */
  40: list<Finding> findings;
}

/** A recorded sequence of operator calls with the tensors they read and wrote. */
struct CallTrace {
  /** Versions and op schemas. */
  10: TraceHeader header;
  /** Calls in the order they ran. */
  20: list<CallRecord> records;
  /** Tensor table: every tensor a record names, stored once. */
  30: map<string, TensorValue> tensors;
}

/** One tensor value of a streamed trace: its layout, and which payload frame holds its elements. */
struct TraceTensor {
  /** Trace name (`t<N>` for the N-th tensor object, `t<N>.<k>` for its k-th later value). */
  10: string name;
  /** dtype, sizes, strides, storage_offset, device, requires_grad (and the digest when only one was kept); data is empty. */
  20: TensorValue value;
  /** SHA-256 (hex) of the payload: the storage elements from storage_offset to the last element the layout reaches; absent when the tensor is empty or only a digest was kept. */
  30: optional string payload;
  /** True when the value's content is undefined (memory from `empty*` not yet written, a view of it): no payload is written, and readers rebuild it as zeros that replay and diff never compare. Since 1.6. */
  40: optional bool undefined;
}

/** The schema string of an op, written before the first record that calls it. */
struct TraceOpSchema {
  /** Operator as "namespace::name.overload". */
  10: string op;
  /** Its schema string in the recording torch. */
  20: string schema_str;
}

/** Tensor objects the recorded program let go of: no later record names them. */
struct TraceFreed {
  /** Object names (`t<N>`). */
  10: list<string> objects;
}

/** The last frame of a complete streamed trace: what it holds, so a reader can tell a cut from the end. */
struct TraceEnd {
  /** Number of record frames. */
  10: i64 records;
  /** Number of tensor frames. */
  20: i64 tensors;
  /** Number of payload frames (each distinct content once). */
  30: i64 payloads;
  /** Bytes in payload frames, digests excluded. */
  40: i64 payload_bytes;
}

/** One metadata frame of a streamed trace (docs/wire-format.md). Exactly one member is set. */
union TraceFrame {
  /** First frame: versions and outputs mode (op schemas follow as op_schema frames). */
  10: TraceHeader header;
  /** An op's schema string. */
  20: TraceOpSchema op_schema;
  /** A tensor value that later records name. */
  30: TraceTensor tensor;
  /** One recorded call. */
  40: CallRecord record;
  /** Tensor objects no later record names. */
  50: TraceFreed freed;
  /** The last frame of a complete trace. */
  60: TraceEnd trailer;
  /** A process group a later record uses (kind `g`: lowercase, so readers before records 1.2 skip it). Since 1.2. */
  70: TraceProcessGroup group;
}

/** One argument or return of an operator schema. */
struct OpArgumentSnapshot {
  /** Argument name (empty for unnamed returns). */
  10: string name;
  /** Schema type as torch prints it, e.g. "SymInt[]" or "Tensor?". */
  20: string type;
  /** Default value as the schema string spells it; absent when there is none. */
  30: optional string default_value;
  /** Keyword-only argument. */
  40: bool kwarg_only;
  /** Alias annotation such as "a!" or "a"; absent when the argument does not alias. */
  50: optional string alias_info;
}

/** One operator overload. */
struct OpSchemaSnapshot {
  /** Qualified name "namespace::name". */
  10: string name;
  /** Overload name; empty for the default overload. */
  20: string overload;
  /** The full schema string. */
  30: string schema_str;
  /** Arguments in schema order. */
  40: list<OpArgumentSnapshot> arguments;
  /** Returns in schema order. */
  50: list<OpArgumentSnapshot> returns;
  /** Tags (torch.Tag names), sorted. */
  60: list<string> tags;
}

/** Every op of some namespaces: the input of `opwire ops bc-check`. */
struct OpLibrarySnapshot {
  /** Namespaces covered, sorted. */
  10: list<string> namespaces;
  /** Ops sorted by name and overload. */
  20: list<OpSchemaSnapshot> ops;
  /** torch.__version__ when the snapshot was taken. */
  30: string torch_version;
}

/** One dispatch key of an op, as op validation found it. Since 1.3. */
struct OpKernel {
  /** Dispatch key name, e.g. "CPU" or "CompositeImplicitAutograd". */
  10: string key;
  /** A kernel is registered directly for this key. */
  20: bool registered;
  /** A kernel runs for this key (absent for alias keys: they have no runtime kernel of their own). */
  30: optional bool runnable;
  /** Where the kernel comes from in torch's computed table ("kernel", "math kernel", "backend fallback", ...). */
  40: optional string source;
}

/** How torch.vmap handles an op. Since 1.3. */
struct OpVmapRoute {
  /** "batching_rule", "register_vmap", "decomposition", "fallback" or "unsupported". */
  10: string route;
  /** Why, in words. */
  20: string detail;
}

/** Everything op validation learned about one operator overload. Since 1.3. */
struct OpValidationReport {
  /** The overload, as "ns::op.overload". */
  10: string op;
  /** Its schema; absent when the op has none (JSON key `op_schema`: `schema` is taken by pydantic's BaseModel). */
  20: optional OpSchemaSnapshot op_schema;
  /** Names of the arguments the op writes to (alias annotations with "!"). */
  30: list<string> mutated_args;
  /** Its dispatch keys. */
  40: list<OpKernel> kernels;
  /** How its fake (meta) implementation is provided; absent when it has none. */
  50: optional string fake_impl;
  /** How torch.vmap handles it; absent when not checked. */
  60: optional OpVmapRoute vmap_route;
  /** What validation found. */
  70: list<Finding> findings;
}

/** What `opwire ops validate --json` prints. Since 1.3. */
struct OpValidationOutput {
  /** Number of findings of severity error (the exit is 1 when it is not 0). */
  10: i64 errors;
  /** The checks that ran. */
  20: list<string> checks;
  /** One report per op overload. */
  30: list<OpValidationReport> reports;
}

/** One change bc-check found between two op-library versions: a Finding's fields plus whom it affects. Since 1.3. */
struct BcCheckChange {
  /** Stable catalog code (docs/errors.md). */
  10: string code;
  /** "error", "warning" or "info": the worst effect under the report's policy. */
  20: string severity;
  /** The op overload, as "ns::op.overload". */
  30: string op;
  /** What changed. */
  40: string message;
  /** What to do about it. */
  50: string fix;
  /** The effect on source callers: "breaking", "silent" or "compatible". */
  60: string callers;
  /** The effect on files written under each default policy (DefaultPolicy name -> effect). */
  70: map<string, string> effects;
}

/** torch's own verdict on one overload present in both versions (FunctionSchema.is_backward_compatible_with). Since 1.3. */
struct BcTorchVerdict {
  /** The overload. */
  10: string op;
  /** torch says the new schema is backward compatible with the old. */
  20: bool backward_compatible;
  /** torch says the new schema is forward compatible with the old. */
  30: bool forward_compatible;
  /** torch's reason when it is not. */
  40: string reason;
}

/** What `opwire ops bc-check --json` prints. Since 1.3. */
struct BcCheckReport {
  /** The default policy the changes were judged under (DefaultPolicy name). */
  10: string policy;
  /** Number of changes that break callers or files under the policy. */
  20: i64 breaking;
  /** Every change, in op order. */
  30: list<BcCheckChange> changes;
  /** torch's own verdicts. */
  40: list<BcTorchVerdict> torch;
}

/** One output of a replayed call that differs from the recording. Since 1.3. */
struct ReplayMismatch {
  /** Call index in the trace. */
  10: i64 index;
  /** The op, as "ns::op.overload". */
  20: string op;
  /** Which output: "output 0" or "argument self (written in place)". */
  30: string output;
  /** "shape", "dtype", "stride", "value", "missing" or "error". */
  40: string kind;
  /** What differs, in words. */
  50: string detail;
  /** Largest absolute difference, for value mismatches. */
  60: optional double max_diff;
  /** Index of the element with the largest difference. */
  70: optional list<i64> where;
  /** Largest relative difference, for value mismatches. */
  80: optional double max_rel;
  /** Source line of the recorded call ("train.py:12 in forward"; empty when unknown). */
  90: string source;
  /** Module path of the recorded call ("MLP.blocks.3.fc1"; empty when unknown). */
  100: string module_path;
  /** Where each tensor input came from ("self = t12, output of call 16 aten::addmm.default"). */
  110: list<string> inputs;
}

/** A recorded call replay did not run. Since 1.3. */
struct ReplaySkip {
  /** Call index in the trace. */
  10: i64 index;
  /** The op. */
  20: string op;
  /** Why it was skipped. */
  30: string reason;
}

/** Replay figures of one op. Since 1.3. */
struct ReplayOpStats {
  /** Calls replayed. */
  10: i64 calls;
  /** Calls with a mismatch. */
  20: i64 mismatches;
  /** Largest absolute difference seen, also within tolerance. */
  30: double worst_abs;
  /** Largest relative difference seen, also within tolerance. */
  40: double worst_rel;
}

/** A stretch of replayed calls and its wall time: `opwire replay RUN --collectives` ends one after each c10d call, so the spans of a rank's replay cover its timed loop in call order and their seconds add up to its `seconds`. Since 1.9. */
struct ReplaySpan {
  /** Index of the first call of the stretch. */
  10: i64 start;
  /** Index one past its last call (a c10d call, except for the last stretch). */
  20: i64 stop;
  /** Wall time from the start of call `start` to the end of call `stop - 1`, every check included, seconds. */
  30: double seconds;
}

/** What one replay process reports to its parent (`opwire.replay(..., workers=N)`, distributed replay ranks). Since 1.3. */
struct ReplayWorkerReport {
  /** Replay mode, e.g. "isolated". */
  10: string mode;
  /** Calls in the whole trace. */
  20: i64 calls;
  /** Calls this process replayed. */
  30: i64 replayed;
  /** Outputs that differ, in call order. */
  40: list<ReplayMismatch> mismatches;
  /** Calls it did not run. */
  50: list<ReplaySkip> skipped;
  /** Figures per op ("ns::op.overload" -> stats). */
  60: map<string, ReplayOpStats> ops;
  /** Wall time of the replay, seconds. */
  70: double seconds;
  /** The replay's wall time split after each c10d call (`--collectives`); absent when not split. Since 1.9. */
  80: optional list<ReplaySpan> spans;
}

/** What stopped an isolated child's work, sent instead of its results and raised by the parent as the opwire error it names. Since 1.8. */
struct IsolatedError {
  /** The opwire error class: "OpwireError", "DecodeError", "EncodeError", "BindError", "UnknownTargetError", "KernelError" or "BudgetError"; the parent raises any other name as a KernelError. */
  10: string error_class;
  /** The error's message (the parent escapes it for one terminal line). */
  20: string message;
  /** The budget a BudgetError names ("max_memory", "cpu_time", "timeout", ...); empty for the other classes. */
  30: string budget;
}

/** What a sandboxed child (`opwire.proxy_executor.isolate`) sends its parent on the result pipe, Thrift compact with opwire's header: its results, or the one error. Exactly one member is set. Since 1.8. */
union IsolatedResult {
  /** Named byte strings the child's work returned, each encoded by the caller with opwire's codecs (`opwire exec` and `opwire run` in a child, a distributed rank's replay). */
  10: map<string, binary> blobs;
  /** A program's user outputs ("output[i]") and the buffers and parameters it mutated ("state[name]"): `run_program(..., isolate=True)`. */
  20: Values values;
  /** The partial report of an isolated replay (`opwire.replay(..., isolate=True)`). */
  30: ReplayWorkerReport report;
  /** What stopped the work. */
  40: IsolatedError error;
}

/** Statistics of a tensor's elements, taken as doubles (`opwire run` and `opwire exec` outputs). Since 1.4. */
struct ValueStats {
  /** Smallest element. */
  10: double min;
  /** Largest element. */
  20: double max;
  /** Mean of the elements. */
  30: double mean;
  /** Standard deviation of the elements (0 for one element). */
  40: double std;
  /** Elements that are NaN or infinite; absent when every element is finite. */
  50: optional i64 nonfinite;
  /** The statistics cover only this many first elements (in index order); absent when they cover all. */
  60: optional i64 of_first;
}

/** One value as `opwire run --json` and `opwire exec --json` show it: a tensor's dtype, shape, device, first elements and statistics, or a scalar, or the first items of a list. Since 1.4. */
struct ValueSummary {
  /** "Tensor", or the Python type's name ("int", "float", "bool", "str", "NoneType", "list", "tuple", ...). */
  10: string kind;
  /** A tensor's element type, as torch names it ("float32"). */
  20: optional string dtype;
  /** A tensor's shape (a nested tensor: its number of components). */
  30: optional list<i64> shape;
  /** A tensor's device ("cpu", "cuda:0"). */
  40: optional string device;
  /** A tensor's layout when it is not strided ("sparse_coo", "nested", ...). */
  50: optional string layout;
  /** Stored elements of a sparse COO tensor. */
  60: optional i64 nnz;
  /** True for a quantized tensor (its values and statistics are dequantized). */
  70: optional bool quantized;
  /** The first elements of a real tensor, in index order (as doubles: bools are 0/1). */
  80: optional list<double> values;
  /** The first elements of a complex tensor, in index order. */
  90: optional list<export_schema.ComplexValue> complex_values;
  /** Statistics of a real tensor's elements (absent for an empty or complex tensor). */
  100: optional ValueStats stats;
  /** Why a tensor's values are not shown. */
  110: optional string note;
  /** A scalar's value (None is as_none); another object's repr as as_string. */
  120: optional Value value;
  /** The first items of a list or tuple. */
  130: optional list<ValueSummary> items;
  /** How many items the list or tuple has. */
  140: optional i64 length;
}

/** One node that `opwire exec` ran (or that failed). Since 1.4. */
struct ExecNodeResult {
  /** Index of the node in the extern-node file. */
  10: i64 index;
  /** The node's name. */
  20: string name;
  /** The op it calls, as "ns::op.overload". */
  30: string target;
  /** Each output by its serialized name; absent when the node failed. */
  40: optional map<string, ValueSummary> outputs;
  /** Why the node failed (or why the isolated run stopped); absent when it ran. */
  50: optional string error;
}

/** What `opwire exec --json` prints. Since 1.4. */
struct ExecOutput {
  /** The nodes in the order they ran; the last one has `error` when a call failed. */
  10: list<ExecNodeResult> nodes;
  /** Every node ran. */
  20: bool ok;
}

/** What `opwire run --json` prints (after a run that succeeded). Since 1.4. */
struct RunOutput {
  /** The run succeeded (a failed run prints its error on stderr and exits 1). */
  10: bool ok;
  /** Each leaf of the program's result as "output[i]", in pytree order. */
  20: map<string, ValueSummary> outputs;
  /** Each output's label as the text shows it: "output[i]" and, for a structured result, its pytree path ("output[0] .logits"). */
  30: list<string> labels;
}

/** One user input or output of a program (`opwire inspect`). Since 1.4. */
struct ProgramPort {
  /** The input's or output's name in the graph. */
  10: string name;
  /** "Tensor", "SymInt", "SymFloat", "SymBool", "int", "float", "bool", "str", "None", ... */
  20: string kind;
  /** A tensor's element type ("float32"). */
  30: optional string dtype;
  /** A tensor's shape; a symbolic size is -1 (symbolic_shape spells it). */
  40: optional list<i64> shape;
  /** A tensor's shape with every size as text ("s0", "2*s0", "8"); absent when no size is symbolic. */
  50: optional list<string> symbolic_shape;
  /** A tensor's device ("cpu"). */
  60: optional string device;
  /** The value of an input the program was specialized to, or of a constant output. */
  70: optional Value value;
  /** An input the program was exported with a fixed value for (torch's constant_input). */
  80: bool constant = false;
}

/** A node of an extern-node file that reads names no earlier node produces (`opwire inspect`). Since 1.4. */
struct ExternRead {
  /** Index of the node. */
  10: i64 index;
  /** The node's name. */
  20: string name;
  /** The op it calls. */
  30: string op;
  /** The names it reads that `opwire exec --inputs` must give. */
  40: list<string> reads;
}

/** What `opwire inspect --json` prints: `kind` and `codec`, then what that kind of file has (absent fields do not apply). Since 1.4. */
struct InspectOutput {
  /** What the file holds ("ExportedProgram", "pt2 archive", "streamed CallTrace", "Values", ...). */
  10: string kind;
  /** How it is encoded ("json", "thrift compact (opwire header, schema 1.4)", "zip archive", ...). */
  20: string codec;
  /** The model's name inside a .pt2 archive. */
  30: optional string model;
  /** Blobs of a .opw archive. */
  40: optional i64 blobs;
  /** A program's export schema version ("8.20"). */
  50: optional string schema_version;
  /** torch version that wrote the program or recorded the trace. */
  60: optional string torch_version;
  /** opwire version that recorded the trace. */
  70: optional string opwire_version;
  /** A trace's outputs mode ("full" or "digest"). */
  80: optional string outputs_mode;
  /** Calls a trace holds. */
  90: optional i64 records;
  /** Tensors a trace holds. */
  100: optional i64 tensors;
  /** Size of a streamed trace, bytes. */
  110: optional i64 bytes;
  /** Where a cut streamed trace ends. */
  120: optional string cut;
  /** A program's user inputs, in order. */
  130: optional list<ProgramPort> inputs;
  /** A program's user outputs, in order. */
  140: optional list<ProgramPort> outputs;
  /** Ranges of the symbols a program's shapes use. */
  150: optional map<string, export_schema.RangeConstraint> ranges;
  /** Parameters the program binds itself. */
  160: optional i64 parameters;
  /** Buffers the program binds itself. */
  170: optional i64 buffers;
  /** Tensor constants the program binds itself. */
  180: optional i64 constants;
  /** Custom objects the program binds itself. */
  190: optional i64 custom_objects;
  /** Inputs the program was specialized to (also listed in inputs). */
  200: optional i64 constant_inputs;
  /** Effect tokens. */
  210: optional i64 tokens;
  /** Nodes of a program (with its subgraphs) or an extern-node file. */
  220: optional i64 nodes;
  /** Calls per op ("ns::op.overload" -> count), most used first. */
  230: optional map<string, i64> ops;
  /** How often each Argument member occurs in the nodes' inputs and outputs. */
  240: optional map<string, i64> argument_members;
  /** An extern-node file's nodes that read names no earlier node produces. */
  250: optional list<ExternRead> reads;
  /** Weights an archive stores. */
  260: optional i64 weights;
  /** Constants an archive stores. */
  270: optional i64 stored_constants;
  /** Bytes of an OpwireArchive's weights and constants. */
  280: optional i64 payload_bytes;
  /** Namespaces an op-library snapshot covers. */
  290: optional list<string> namespaces;
  /** Op overloads an op-library snapshot holds. */
  300: optional i64 overloads;
  /** A Values file's entries, each as "float32[2, 8] on cpu", "int 3", "list of 2". */
  310: optional map<string, string> values;
  /** Entries of a findings file. */
  320: optional i64 entries;
  /** What `--verify` checked ("every entry's CRC-32 matches"). */
  330: optional string verified;
}

/** One call two traces made differently, aligned (`opwire diff`). Since 1.4. */
struct TraceCallDifference {
  /** Call index in A. */
  10: i64 a_index;
  /** Call index in B. */
  20: i64 b_index;
  /** The op, as "ns::op.overload". */
  30: string op;
  /** What differs: "output 0", "argument alpha". */
  40: string what;
  /** "argument", "value", "shape", "dtype", "stride" or "missing". */
  50: string kind;
  /** What differs, in words. */
  60: string detail;
  /** Largest absolute difference, for value differences. */
  70: optional double max_diff;
  /** Largest relative difference, for value differences. */
  80: optional double max_rel;
  /** Where A made the call ("train.py:12 in forward"; empty when unknown). */
  90: string source;
  /** "local" (the call itself differs), "inherited" (only its inputs did), "inherited from another rank" (a
      collective whose inputs agree on this rank), "inherited from rank N" (`opwire diff RUN_A RUN_B`); absent
      or empty when not checked. Since 1.5. */
  100: optional string origin;
}

/** A call only one trace made (`opwire diff`). Since 1.4. */
struct TraceOnlyIn {
  /** "A" or "B". */
  10: string side;
  /** Call index in that trace. */
  20: i64 index;
  /** Index in the other trace where the call would sit. */
  30: i64 at;
  /** The op. */
  40: string op;
  /** Where the call was made (empty when unknown). */
  50: string source;
}

/** The earliest difference of two traces: an aligned call that differs, or a call only one trace made. Since 1.4. */
union TraceDivergence {
  /** An aligned pair of calls that differ. */
  10: TraceCallDifference difference;
  /** A call one trace made and the other did not. */
  20: TraceOnlyIn only_in;
}

/** Figures of one op in `opwire diff`. Since 1.4. */
struct TraceDiffOpStats {
  /** Aligned calls. */
  10: i64 calls;
  /** Aligned calls whose outputs differ. */
  20: i64 value_diffs;
  /** Aligned calls whose arguments differ. */
  30: i64 arg_diffs;
  /** Calls only A made. */
  40: i64 only_a;
  /** Calls only B made. */
  50: i64 only_b;
  /** Largest absolute difference seen, also within tolerance. */
  60: double worst_abs;
  /** Largest relative difference seen, also within tolerance. */
  70: double worst_rel;
}

/** What `opwire diff A B --json` prints for two traces. Since 1.4. */
struct TraceDiffOutput {
  /** The first trace. */
  10: string a;
  /** The second trace. */
  20: string b;
  /** Calls in A. */
  30: i64 a_calls;
  /** Calls in B. */
  40: i64 b_calls;
  /** Aligned calls. */
  50: i64 matched;
  /** The traces made the same calls with the same arguments and outputs. */
  60: bool ok;
  /** The earliest difference in call order; absent when they agree. */
  70: optional TraceDivergence first_divergence;
  /** Every aligned call that differs, in call order. */
  80: list<TraceCallDifference> differences;
  /** Calls only A made. */
  90: list<TraceOnlyIn> only_a;
  /** Calls only B made. */
  100: list<TraceOnlyIn> only_b;
  /** Figures per op. */
  110: map<string, TraceDiffOpStats> ops;
  /** The earliest call that differs itself (local, or made by one trace only): the report's headline. Since 1.5. */
  120: optional TraceDivergence first_local;
}

/** A rank's first divergence in `opwire diff RUN_A RUN_B`. Since 1.4. */
struct RunDiffDivergence {
  /** The rank. */
  10: i64 rank;
  /** Call index (in A; in B for a call only B made). */
  20: i64 index;
  /** The divergence in words, as the text report shows it. */
  30: string text;
  /** "local", "inherited", or "inherited from rank N"; absent or empty when not checked. Since 1.5. */
  40: optional string origin;
}

/** What `opwire diff RUN_A RUN_B --json` prints for two run directories. Since 1.4. */
struct RunDiffOutput {
  /** The first run directory. */
  10: string a;
  /** The second run directory. */
  20: string b;
  /** Ranks of each run. */
  30: i64 world_size;
  /** Every rank agrees. */
  40: bool ok;
  /** The first divergence of every rank that diverges, earliest first. */
  50: list<RunDiffDivergence> divergences;
  /** Each rank's diff, in rank order. */
  60: list<TraceDiffOutput> ranks;
}

/** An op whose schema in the running torch differs from the recorded one. Since 1.4. */
struct ReplaySchemaDrift {
  /** The op. */
  10: string op;
  /** Its schema when recorded. */
  20: string recorded;
  /** Its schema now; absent when the op is not registered in this process. */
  30: optional string current;
}

/** What `opwire replay TRACE --json` prints. Since 1.4. */
struct ReplayOutput {
  /** "isolated" or "chained". */
  10: string mode;
  /** Calls in the trace. */
  20: i64 calls;
  /** Calls replayed. */
  30: i64 replayed;
  /** Every replayed call matched. */
  40: bool ok;
  /** False for a cut trace or one without calls: nothing proves it passed. */
  50: bool complete;
  /** Calls with at least one mismatch. */
  60: i64 mismatching_calls;
  /** The earliest mismatch; absent when everything matched. */
  70: optional ReplayMismatch first_divergence;
  /** Every mismatch, in call order. */
  80: list<ReplayMismatch> mismatches;
  /** Calls not replayed. */
  90: list<ReplaySkip> skipped;
  /** Ops whose schema changed since the recording. */
  100: list<ReplaySchemaDrift> schema_drift;
  /** torch version of the recording. */
  110: string recorded_torch;
  /** torch version of the replay. */
  120: string torch_version;
  /** Wall time, seconds. */
  130: double seconds;
  /** Figures per op ("ns::op.overload" -> stats). */
  140: map<string, ReplayOpStats> ops;
  /** Where a cut trace ends; absent when it is whole. */
  150: optional string cut;
  /** The tolerance used ("dtype defaults", or the rtol/atol given). */
  160: string tolerance;
  /** Processes the replay used. */
  170: i64 workers;
  /** Each mismatch, skipped call and drifted op schema as a Finding (codes replay_*, docs/errors.md). */
  180: list<Finding> findings;
  /** `seconds` split after each c10d call (`opwire replay RUN --collectives`); absent when not split. Since 1.9. */
  190: optional list<ReplaySpan> spans;
}

/** The first place one rank's replay, or a collective check, parts from the recording (`opwire replay RUN`). Since 1.4. */
struct RunReplayDivergence {
  /** The rank. */
  10: i64 rank;
  /** Call index in the rank's trace. */
  20: i64 index;
  /** The op. */
  30: string op;
  /** Source line of the call (empty when unknown). */
  40: string source;
  /** Module path of the call (empty when unknown). */
  50: string module_path;
  /** What differs. */
  60: string detail;
}

/** What `opwire replay RUN --json` prints (each rank isolated, or under torchrun with --collectives). Since 1.4. */
struct RunReplayOutput {
  /** The run directory. */
  10: string path;
  /** "isolated" or "collectives". */
  20: string mode;
  /** Ranks of the run. */
  30: i64 world_size;
  /** No rank diverged and the collectives agree. */
  40: bool ok;
  /** The earliest divergence over all ranks; absent when none. */
  50: optional RunReplayDivergence first_divergence;
  /** The first divergence of each rank that has one, in rank order. */
  60: list<RunReplayDivergence> first;
  /** Each rank's replay, in rank order. */
  70: list<ReplayOutput> ranks;
  /** The cross-rank collective check; absent when it did not run. */
  80: optional RanksReport collectives;
}

/** One difference `opwire schema diff` found and the bump it needs. Since 1.4. */
struct SchemaDiffChange {
  /** Rule code (opwire/schema/README.md). */
  10: string code;
  /** "major", "minor" or "none". */
  20: string bump;
  /** The type, field or value it is about ("Color.BLUE"). */
  30: string where;
  /** What changed. */
  40: string message;
}

/** What `opwire schema diff OLD NEW --json` prints. Since 1.4. */
struct SchemaDiffOutput {
  /** The largest bump any change needs: "major", "minor" or "none". */
  10: string bump;
  /** Every change, including those needing no bump. */
  20: list<SchemaDiffChange> changes;
}

/** What `opwire view FILE --json` prints. Since 1.4. */
struct ViewOutput {
  /** The page written. */
  10: string page;
  /** Its size, bytes. */
  20: i64 bytes;
}

/** The op policy's verdict on one op overload (`opwire ops policy`). Since 1.6. */
struct OpPolicyVerdict {
  /** "ns::op.overload" ("ns::op" for the default overload). */
  10: string op;
  /** "admitted", "precondition", "refused" or "trusted" (a namespace torch does not ship: the user's library). */
  20: string verdict;
  /** The source (admitted), the precondition family (precondition) or the category (refused). */
  30: string detail;
  /** The sentence saying why. */
  40: string reason;
  /** What `--allow-op` (`allow_ops`) takes to run it anyway; absent unless refused. */
  50: optional string allow;
}

/** What `opwire ops policy OP... --json` prints. Since 1.6. */
struct OpPolicyOutput {
  /** Number of refused overloads (the exit is 1 when it is not 0). */
  10: i64 refused;
  /** The one flag admitting every refused overload (`--allow-op A,B`); absent when none is refused. */
  20: optional string allow;
  /** One verdict per overload, in the order asked. */
  30: list<OpPolicyVerdict> verdicts;
}
