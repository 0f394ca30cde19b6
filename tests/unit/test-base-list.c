/* Unit tests for src/base/list.h: prepend, remove at the head, middle and
 * tail, removal while iterating, and an element put back after removal. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "base/list.h"

struct item {
        int value;
        DLIST_FIELDS(struct item);
};

/* The values from head to tail, checking every back link on the way. */
static int values(struct item *head, int *out, int max)
{
        int n = 0;
        struct item *i, *prev = NULL;
        DLIST_FOREACH(i, head) {
                assert_ptr_equal(i->prev, prev);
                assert_true(n < max);
                out[n++] = i->value;
                prev = i;
        }
        return n;
}

static void fill(struct item **head, struct item *items, int n)
{
        for (int k = n - 1; k >= 0; k--) {
                items[k].value = k;
                DLIST_PREPEND(*head, &items[k]);
        }
}

static void test_prepend_orders_newest_first(void **state)
{
        struct item *head = NULL, items[3];
        int v[3];
        assert_int_equal(values(head, v, 3), 0);
        fill(&head, items, 3);
        assert_int_equal(values(head, v, 3), 3);
        assert_int_equal(v[0], 0);
        assert_int_equal(v[1], 1);
        assert_int_equal(v[2], 2);
}

static void test_remove_head_middle_tail(void **state)
{
        struct item *head = NULL, items[4];
        int v[4];
        fill(&head, items, 4);
        DLIST_REMOVE(head, &items[1]);
        assert_null(items[1].prev);
        assert_null(items[1].next);
        assert_int_equal(values(head, v, 4), 3);
        assert_int_equal(v[0], 0);
        assert_int_equal(v[1], 2);
        assert_int_equal(v[2], 3);
        DLIST_REMOVE(head, &items[0]);
        assert_ptr_equal(head, &items[2]);
        DLIST_REMOVE(head, &items[3]);
        assert_int_equal(values(head, v, 4), 1);
        assert_int_equal(v[0], 2);
        DLIST_REMOVE(head, &items[2]);
        assert_null(head);
        /* A removed element can go back in. */
        DLIST_PREPEND(head, &items[1]);
        assert_int_equal(values(head, v, 4), 1);
        assert_int_equal(v[0], 1);
}

static void test_remove_while_iterating(void **state)
{
        struct item *head = NULL, items[5], *i, *n;
        int v[5];
        fill(&head, items, 5);
        DLIST_FOREACH_SAFE(i, n, head)
                if (i->value % 2 == 0)
                        DLIST_REMOVE(head, i);
        assert_int_equal(values(head, v, 5), 2);
        assert_int_equal(v[0], 1);
        assert_int_equal(v[1], 3);
        DLIST_FOREACH_SAFE(i, n, head)
                DLIST_REMOVE(head, i);
        assert_null(head);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_prepend_orders_newest_first),
                cmocka_unit_test(test_remove_head_middle_tail),
                cmocka_unit_test(test_remove_while_iterating),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
