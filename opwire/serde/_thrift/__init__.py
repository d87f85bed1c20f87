"""The Thrift wire engine behind `opwire.serde.thrift`: binary and compact readers/writers, the checking
decoder, the encoder, the specs built from the IDL, and the Apache Thrift fast path. Private to serde."""
