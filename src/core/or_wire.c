/*
 * Copyright (C) ngx_omniroute authors
 *
 * The Redis mirror's wire format; see or_wire.h.
 */


#include <string.h>

#include "or_wire.h"


size_t
or_wire_encode_value(uint8_t *buf, unsigned table, const void *value,
    size_t size, or_msec_t time)
{
    uint32_t  n;

    buf[0] = 'O';
    buf[1] = 'R';
    buf[2] = OR_WIRE_VERSION;
    buf[3] = (uint8_t) table;
    n = (uint32_t) size;
    memcpy(buf + 4, &n, 4);
    memcpy(buf + 8, &time, 8);

    if (size) {
        memcpy(buf + OR_WIRE_VALUE_HDR, value, size);
    }

    return OR_WIRE_VALUE_HDR + size;
}


int
or_wire_decode_value(const uint8_t *data, size_t len, unsigned table,
    const uint8_t **value, size_t *size, or_msec_t *time)
{
    uint32_t  n;

    if (len < OR_WIRE_VALUE_HDR
        || data[0] != 'O' || data[1] != 'R'
        || data[2] != OR_WIRE_VERSION
        || data[3] != table)
    {
        return -1;
    }

    memcpy(&n, data + 4, 4);

    if (n != len - OR_WIRE_VALUE_HDR || n == 0 || n > OR_WIRE_VALUE_MAX) {
        return -1;
    }

    memcpy(time, data + 8, 8);

    *value = data + OR_WIRE_VALUE_HDR;
    *size = n;

    return 0;
}


size_t
or_wire_encode_msg(uint8_t *buf, const uint8_t *node, size_t node_len,
    unsigned op, unsigned table, const uint8_t *key, size_t key_len,
    const void *value, size_t size, or_msec_t time)
{
    uint8_t   *p;
    uint32_t   n;

    buf[0] = 'O';
    buf[1] = 'R';
    buf[2] = OR_WIRE_VERSION;
    buf[3] = (uint8_t) op;
    buf[4] = (uint8_t) table;
    buf[5] = (uint8_t) node_len;
    buf[6] = (uint8_t) key_len;
    buf[7] = 0;
    memcpy(buf + 8, &time, 8);
    n = (uint32_t) size;
    memcpy(buf + 16, &n, 4);
    memset(buf + 20, 0, 4);

    p = buf + OR_WIRE_MSG_HDR;

    if (node_len) {
        memcpy(p, node, node_len);
        p += node_len;
    }

    if (key_len) {
        memcpy(p, key, key_len);
        p += key_len;
    }

    if (size) {
        memcpy(p, value, size);
        p += size;
    }

    return (size_t) (p - buf);
}


int
or_wire_decode_msg(const uint8_t *data, size_t len, unsigned tables,
    or_wire_msg_t *msg)
{
    uint32_t  n;

    if (len < OR_WIRE_MSG_HDR
        || data[0] != 'O' || data[1] != 'R'
        || data[2] != OR_WIRE_VERSION
        || data[3] > OR_WIRE_OP_HEARTBEAT
        || data[4] >= tables)
    {
        return -1;
    }

    msg->op = data[3];
    msg->table = data[4];
    msg->node_len = data[5];
    msg->key_len = data[6];
    memcpy(&msg->time, data + 8, 8);
    memcpy(&n, data + 16, 4);
    msg->size = n;

    if (msg->size > OR_WIRE_VALUE_MAX
        || OR_WIRE_MSG_HDR + msg->node_len + msg->key_len + msg->size != len)
    {
        return -1;
    }

    msg->node = data + OR_WIRE_MSG_HDR;
    msg->key = msg->node + msg->node_len;
    msg->value = msg->key + msg->key_len;

    return 0;
}
