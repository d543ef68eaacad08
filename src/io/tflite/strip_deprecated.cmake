# strip_deprecated.cmake - copies TensorFlow's TFLite schema (IN) to OUT
# without the `(deprecated)` attributes flatc 2.0.8 cannot parse on an enum
# value, a union member and a table (CMakeLists.txt says why that is safe).
# Run as: cmake -DIN=schema.fbs -DOUT=copy.fbs -P strip_deprecated.cmake
file(READ ${IN} text)
string(REPLACE "REDUCE_WINDOW = 205 (deprecated)," "REDUCE_WINDOW = 205," text "${text}")
string(REPLACE "ReduceWindowOptions (deprecated)," "ReduceWindowOptions," text "${text}")
string(REPLACE "table ReduceWindowOptions (deprecated) {" "table ReduceWindowOptions {" text "${text}")
file(WRITE ${OUT} "${text}")
