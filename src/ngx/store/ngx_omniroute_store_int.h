
/*
 * Copyright (C) ngx_omniroute authors
 *
 * Internals of the state store (see ngx_omniroute_store.h), shared by
 * ngx_omniroute_store.c (records, eviction, reads and updates, the event
 * ring) and ngx_omniroute_store_zone.c (the zone's life: made, adopted
 * after a reload, carried into a zone of another size).  Only the
 * store's own sources include it.
 */


#ifndef _NGX_OMNIROUTE_STORE_INT_H_INCLUDED_
#define _NGX_OMNIROUTE_STORE_INT_H_INCLUDED_


#include <ngx_config.h>
#include <ngx_core.h>

#include "ngx_omniroute_store.h"


/* a record: laid over ngx_rbtree_node_t.color, as in limit_req */
typedef struct {
    u_char                        color;
    u_char                        table;
    u_short                       key_len;
    uint32_t                      size;         /* of the value */
    ngx_queue_t                   queue;        /* LRU, most recent first */
    or_msec_t                     expires;      /* 0: no expiry */
    uint64_t                      version;
    u_char                        data[1];      /* value, then key */
} ngx_omniroute_node_t;


/*
 * What the store knows of a table: its eviction class, the most
 * protective class its new records may evict (never one above their
 * own, except runtime settings, which evict anything but settings), and
 * whether the Redis mirror reads its changes from the event ring.
 */
typedef struct {
    const char                   *name;
    ngx_uint_t                    class;
    ngx_uint_t                    evicts;
    ngx_uint_t                    mirrored;
} ngx_omniroute_table_t;


#define ngx_omniroute_node_of(n)                                             \
    ((ngx_omniroute_node_t *) &(n)->color)

#define ngx_omniroute_rbnode_of(sn)                                          \
    ((ngx_rbtree_node_t *) ((u_char *) (sn)                                  \
                            - offsetof(ngx_rbtree_node_t, color)))

#define ngx_omniroute_node_key(sn)  ((sn)->data + (sn)->size)

#define ngx_omniroute_node_size(size, key_len)                               \
    (offsetof(ngx_rbtree_node_t, color)                                      \
     + offsetof(ngx_omniroute_node_t, data) + (size) + (key_len))

#define ngx_omniroute_class_of(sn)                                           \
    ngx_omniroute_store_tables[(sn)->table].class


extern ngx_omniroute_table_t  ngx_omniroute_store_tables[NGX_OMNIROUTE_T_COUNT];


void ngx_omniroute_store_rbtree_insert(ngx_rbtree_node_t *temp,
    ngx_rbtree_node_t *node, ngx_rbtree_node_t *sentinel);
ngx_omniroute_node_t *ngx_omniroute_store_lookup(ngx_omniroute_sh_t *sh,
    ngx_uint_t table, ngx_str_t *key, uint32_t hash);
size_t ngx_omniroute_store_chunk(size_t size);
ngx_uint_t ngx_omniroute_store_kept(ngx_omniroute_node_t *sn);


#endif /* _NGX_OMNIROUTE_STORE_INT_H_INCLUDED_ */
