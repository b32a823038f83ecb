/* The rows of the table-driven dispatcher tests (include after fake_driver.h). A bad_row is an
   edit of valid args (or a NULL ctx or args) that an op must reject with a message naming
   field and value; a launch_row an edit with the kernel the op must then launch. op is the
   test file's own op enum (0 in a file that tests one op). */
#ifndef TALON_TABLE_ROWS_H
#define TALON_TABLE_ROWS_H

#define MAX_SETS 4 /* field edits per row; a SET_NONE (or zero) entry ends a shorter list */
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

#endif
