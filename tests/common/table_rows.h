/* The rows of the table-driven dispatcher tests (include after fake_driver.h). A bad_row is an
   edit of valid args (or a NULL ctx or args) that an op must reject with a message naming
   field and value; a launch_row an edit with the kernel the op must then launch. op is the
   test file's own op enum (0 in a file that tests one op). */
#ifndef TALON_TABLE_ROWS_H
#define TALON_TABLE_ROWS_H

#define MAX_SETS 10 /* field edits per row; a SET_NONE (or zero) entry ends a shorter list */
#define ONE(...) {__VA_ARGS__}
#define NONE {{SET_NONE, 0, 0, 0}}

typedef enum { BAD_FIELDS, BAD_CTX, BAD_ARGS } bad_kind;
typedef struct bad_row {
    const char *name;
    int op;
    bad_kind kind;
    field_set set[MAX_SETS];
    const char *field, *value; /* words the message must contain */
} bad_row;

typedef struct launch_row {
    const char *name;
    int op;
    field_set set[MAX_SETS];
    const char *symbol;
} launch_row;

/* Validation rows the norm and activation ops share (T: the args struct, N: the op's name in
   test names, OP: the test file's op id). */
#define TABLE_BAD(NAME, OP, SETS, FIELD, VALUE)                                                       \
    {.name = NAME, .op = OP, .kind = BAD_FIELDS, .set = SETS, .field = FIELD, .value = VALUE}
/* Rules every op shares; COLS_BIG is one past its largest cols. */
#define COMMON_BAD(OP, T, N, COLS_BIG)                                                         \
    {.name = N " rejects ctx NULL", .op = OP, .kind = BAD_CTX, .field = "ctx", .value = "NULL"}, \
    {.name = N " rejects args NULL", .op = OP, .kind = BAD_ARGS, .field = "args", .value = "NULL"}, \
    TABLE_BAD(N " rejects rows = 0", OP, ONE(SET(T, rows, I64, 0)), "args->rows", "0"),              \
    TABLE_BAD(N " rejects rows = -1", OP, ONE(SET(T, rows, I64, -1)), "args->rows", "-1"),           \
    TABLE_BAD(N " rejects rows = 2^31", OP, ONE(SET(T, rows, I64, 2147483648)), "args->rows",        \
        "2147483648"),                                                                         \
    TABLE_BAD(N " rejects cols = 0", OP, ONE(SET(T, cols, I64, 0)), "args->cols", "0"),              \
    TABLE_BAD(N " rejects cols = -1", OP, ONE(SET(T, cols, I64, -1)), "args->cols", "-1"),           \
    TABLE_BAD(N " rejects cols = " #COLS_BIG, OP, ONE(SET(T, cols, I64, COLS_BIG)), "args->cols",    \
        #COLS_BIG),                                                                            \
    TABLE_BAD(N " rejects dtype F32", OP, ONE(SET(T, dtype, ENUM, TALON_DTYPE_F32)), "args->dtype",  \
        "2"),                                                                                  \
    TABLE_BAD(N " rejects dtype = 7", OP, ONE(SET(T, dtype, ENUM, 7)), "args->dtype", "7")
#define ODD_PTR_BAD(OP, T, N, F)                                                               \
    TABLE_BAD(N " rejects odd " #F, OP, ONE(SET(T, F, PTR, 0x7001)), "args->" #F, "0x7001")
#define PTR_BAD(OP, T, N, F)                                                                   \
    TABLE_BAD(N " rejects " #F " NULL", OP, ONE(SET(T, F, PTR, 0)), "args->" #F, "NULL"),            \
    ODD_PTR_BAD(OP, T, N, F)
#define STRIDE_BAD(OP, T, N, F, V)                                                             \
    TABLE_BAD(N " rejects " #F " = " #V " (shorter than a row)", OP, ONE(SET(T, F, I64, V)),         \
        "args->" #F, #V)

#endif
