"""The Thrift wire engine behind `opwire.serde.thrift`, private to serde.

Modules:
    binary: the Thrift binary protocol, pure Python: a bounds-checked reader and a writer
    compact: the Thrift compact protocol, pure Python: a bounds-checked reader and a writer
    decode: the checking decoder, driven by the IDL: exact errors with paths
    encode: the encoder, driven by the IDL: writes what Apache Thrift's C codec writes
    fast: the fast path: Apache Thrift's C codec driven by specs derived from the IDL
    spec: what the codecs derive from the IDL: wire types, `thrift_spec` tuples, model builders
    stack: the explicit stack the checking decoder reads nested values with (no recursion)
    tables: where each tensor's bytes sit in an encoded `OpwireArchive`, found in one walk
"""
