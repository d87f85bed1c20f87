// Included by main.thrift; same file name on both sides of the pair.
struct Meta {
  10: string name;
}
