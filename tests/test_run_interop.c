/* placeholder */
#include <criterion/criterion.h>
