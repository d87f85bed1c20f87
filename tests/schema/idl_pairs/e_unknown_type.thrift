// Negative fixture: a field whose type is defined nowhere.
struct Holder {
  10: Missing thing;
}
