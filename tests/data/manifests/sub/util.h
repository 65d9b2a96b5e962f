/* util.h: test data, an extra source file. */
