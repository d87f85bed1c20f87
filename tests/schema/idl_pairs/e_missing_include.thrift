// Negative fixture: includes a file that does not exist.
include "nowhere.thrift"

struct Holder {
  10: i64 x;
}
