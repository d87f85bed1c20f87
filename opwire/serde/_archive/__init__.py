"""The archive containers' internals behind `opw`, `pt2` and `thrift_archive`, private to serde.

Modules:
    mapping: tensors viewed over a memory-mapped file or an inflated buffer, after every check a view needs
    opw_table: the `.opw` header and tensor table: packed by the writer, checked field by field by the reader
    opw_write: a `.opw` archive written: header, tensor table, aligned blobs, identical storages once
    pt2_layout: where a .pt2 archive keeps its program, weights, constants and example inputs
    pt2_payload: one weight or constant of a .pt2 archive read into a TensorValue, never unpickling by default
    pt2_write: an OpwireArchive written as a .pt2 archive that `torch.export.load` accepts
"""
