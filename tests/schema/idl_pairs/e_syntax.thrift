// Negative fixture: a struct that never closes.
struct Broken {
  10: i64 x;
