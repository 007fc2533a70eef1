/*
 * Copyright (C) ngx_omniroute authors
 *
 * The wire format of the Redis mirror (docs/cluster.md), plain C: what a
 * node writes to Redis and publishes, and the decoders of what it reads
 * back, which is untrusted input.  Native byte order: every node of a
 * cluster runs the same build on the same architecture; the version byte
 * and the sizes reject anything else.
 *
 *   value    "OR" version table | size (u32) | time (i64, ms) | state
 *   message  "OR" version op table node_len key_len 0 | time (i64) |
 *            size (u32) | 0 (u32) | node | key | state
 *
 * "time" is the origin node's clock when the change was made.  The
 * decoders check the framing only (magic, version, op and table ranges,
 * lengths adding up, size <= OR_WIRE_VALUE_MAX) and never read outside
 * the input; the state itself is checked by the table's validator
 * (or_breaker_valid() ...).  Decoded pointers point into the input and
 * are not aligned.
 */

#ifndef _OR_WIRE_H_INCLUDED_
#define _OR_WIRE_H_INCLUDED_


#include "or_types.h"


#define OR_WIRE_VERSION        1

#define OR_WIRE_OP_SET         0
#define OR_WIRE_OP_DELETE      1
#define OR_WIRE_OP_HEARTBEAT   2

#define OR_WIRE_VALUE_HDR      16
#define OR_WIRE_MSG_HDR        24
#define OR_WIRE_VALUE_MAX      (32 * 1024)


typedef struct {
    unsigned         op;
    unsigned         table;
    const uint8_t   *node;
    size_t           node_len;
    const uint8_t   *key;
    size_t           key_len;
    const uint8_t   *value;
    size_t           size;
    or_msec_t        time;
} or_wire_msg_t;


/* buf: room for OR_WIRE_VALUE_HDR + size; returns the length written */
size_t or_wire_encode_value(uint8_t *buf, unsigned table, const void *value,
    size_t size, or_msec_t time);

/* 0 and the state's span, or -1: not a value of this table and version */
int or_wire_decode_value(const uint8_t *data, size_t len, unsigned table,
    const uint8_t **value, size_t *size, or_msec_t *time);

/* node_len, key_len <= 255; buf: room for all; returns the length */
size_t or_wire_encode_msg(uint8_t *buf, const uint8_t *node, size_t node_len,
    unsigned op, unsigned table, const uint8_t *key, size_t key_len,
    const void *value, size_t size, or_msec_t time);

/* 0, or -1: not a message of this version (tables: how many exist) */
int or_wire_decode_msg(const uint8_t *data, size_t len, unsigned tables,
    or_wire_msg_t *msg);


#endif /* _OR_WIRE_H_INCLUDED_ */
