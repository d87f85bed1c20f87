// opwire's own records, built on the export schema. Compatibility rules: README.md beside this file.
// After editing, run: python -m opwire.schema.codegen

include "export_schema.thrift"

namespace py opwire.schema.opwire

/** Major version of opwire's own records. */
const i64 RECORDS_VERSION_MAJOR = 1
/** Minor version of opwire's own records. */
const i64 RECORDS_VERSION_MINOR = 3

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
}
