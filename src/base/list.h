/* Intrusive doubly-linked lists.
 *
 * An element type carries DLIST_FIELDS(its own type), that is `prev` and
 * `next` pointers; the owner keeps a plain head pointer (NULL: empty).  The
 * list allocates nothing and knows nothing of the elements; freeing an
 * element is its owner's business, after DLIST_REMOVE.  Knows nothing of
 * devlet. */
#ifndef DEVLET_BASE_LIST_H
#define DEVLET_BASE_LIST_H

#define DLIST_FIELDS(type) type *prev, *next

/* Puts item (not in any list) first in the list at head. */
#define DLIST_PREPEND(head, item)                                              \
        do {                                                                   \
                __typeof__(item) dlist_item_ = (item);                         \
                dlist_item_->prev = NULL;                                      \
                dlist_item_->next = (head);                                    \
                if (dlist_item_->next)                                         \
                        dlist_item_->next->prev = dlist_item_;                 \
                (head) = dlist_item_;                                          \
        } while (0)

/* Takes item out of the list at head; its prev and next become NULL. */
#define DLIST_REMOVE(head, item)                                               \
        do {                                                                   \
                __typeof__(item) dlist_item_ = (item);                         \
                if (dlist_item_->prev)                                         \
                        dlist_item_->prev->next = dlist_item_->next;           \
                else                                                           \
                        (head) = dlist_item_->next;                            \
                if (dlist_item_->next)                                         \
                        dlist_item_->next->prev = dlist_item_->prev;           \
                dlist_item_->prev = dlist_item_->next = NULL;                  \
        } while (0)

#define DLIST_FOREACH(i, head) for ((i) = (head); (i); (i) = (i)->next)

/* The same, but the body may remove (and free) i: n holds the next one. */
#define DLIST_FOREACH_SAFE(i, n, head)                                         \
        for ((i) = (head); (i) && ((n) = (i)->next, 1); (i) = (n))

#endif
