// base.thrift with one change: enum value renamed.

/** Colours. */
enum Color {
  RED = 1,
  LIME = 2,
}

/** A point. */
struct Point {
  /** Horizontal. */
  10: i64 x;
  /** Vertical. */
  20: i64 y;
  30: optional string label;
  40: list<i64> tags = [];
}

/** A shape: exactly one member. */
union Shape {
  10: Point as_point;
  20: double as_radius;
}

/** Everything drawn. */
struct Canvas {
  10: list<Shape> shapes;
  20: Color background;
}
