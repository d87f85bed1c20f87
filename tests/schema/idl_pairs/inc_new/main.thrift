// Includes common.thrift from beside it.
include "common.thrift"

struct Doc {
  10: common.Meta meta;
}
