/*
 * Copyright (C) ngx_omniroute authors
 */


#include "or_types.h"


static const char  *or_reason_names[OR_REASON_COUNT] = {
    "none",
    "rate_limit_exceeded",
    "quota_exhausted",
    "concurrency_limited",
    "auth_error",
    "credits_exhausted",
    "banned",
    "expired",
    "request_rejected",
    "not_found",
    "context_overflow",
    "bad_request",
    "server_error",
    "timeout",
    "transport",
    "stream_stall",
    "tool_limit",
    "capability"
};


static const char  *or_kind_names[OR_KIND_COUNT] = {
    "oauth",
    "apikey",
    "local"
};


static const char  *or_scope_names[OR_SCOPE_COUNT] = {
    "none",
    "connection",
    "model",
    "base_model",
    "quota_family",
    "provider"
};


const char *
or_reason_name(or_reason_e reason)
{
    if ((unsigned) reason >= OR_REASON_COUNT) {
        return "unknown";
    }

    return or_reason_names[reason];
}


const char *
or_kind_name(or_kind_e kind)
{
    if ((unsigned) kind >= OR_KIND_COUNT) {
        return "unknown";
    }

    return or_kind_names[kind];
}


const char *
or_scope_name(or_scope_e scope)
{
    if ((unsigned) scope >= OR_SCOPE_COUNT) {
        return "unknown";
    }

    return or_scope_names[scope];
}
