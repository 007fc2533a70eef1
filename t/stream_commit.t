#!/usr/bin/perl

# R-REQ-5, R-STREAM-1, R-CLASS-1 (issue 11): the commit point of a stream
# is its first CONTENT event, in the providers' own formats
# (t/fixtures/streams).  An error event after metadata falls over for
# Anthropic Messages, Chat Completions and the Responses API, at once
# (the failing provider keeps its connection open); a stream that ends
# before content falls over; events split across reads are understood;
# the failures are recorded (admin API, metrics); an in-stream quota
# error, escaped or not, is quota_exhausted and never a breaker failure.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use JSON::PP;
use OmniTest;

my $t = OmniTest->new;
my $m = $t->mock('p');

my $TOKEN = 'streams-0123456789-abcdef';
$ENV{OMNI_TEST_API_TOKEN} = $TOKEN;

my %keys = (
    # error after metadata; the connection stays open afterwards
    'an-err' => 'fixture=anthropic-error-after-start,stall=4',
    'oc-err' => 'fixture=openai-chat-error-after-role,stall=2',
    'rf-err' => 'fixture=openai-responses-failed-after-created,stall=3',
    're-err' => 'fixture=openai-responses-error-event,stall=3',
    # the good ones, every event in two writes
    'an-ok'  => 'fixture=anthropic-messages,split=1',
    'oc-ok'  => 'fixture=openai-chat,split=1',
    'rs-ok'  => 'fixture=openai-responses,split=1',
    'or-ok'  => 'fixture=openai-chat-reasoning',
    # ends after the role chunk: cleanly, or by a reset
    'em-fin' => 'fixture=openai-chat,cut=1,chunked=0',
    'em-rst' => 'fixture=openai-chat,rst=1',
    # an escaped quota error inside a 200 stream (agentrouter style)
    'q-esc'  => 'sseerr=x,ping=1,ssedata=' . uri('{"error":{"message":'
                . '"\u7528\u6237\u989d\u5ea6\u4e0d\u8db3","type":'
                . '"new_api_error"}}'),
    'q-raw'  => 'sseerr=x,ssedata=' . uri('{"error":{"message":'
                . '"用户额度不足","type":"new_api_error"}}'),
);

sub uri {
    my ($s) = @_;
    utf8::encode($s) if utf8::is_utf8($s);
    $s =~ s/([^A-Za-z0-9_.~-])/sprintf('%%%02X', ord $1)/ge;
    return $s;
}

my $providers = $t->providers_per_key('p', \%keys);

$t->config(<<"EOF");
    omniroute_zone zone=omniroute:1m;

$providers

    omniroute_combo an an-err/m an-ok/m;
    omniroute_combo oc oc-err/m oc-ok/m;
    omniroute_combo rf rf-err/m rs-ok/m;
    omniroute_combo re re-err/m rs-ok/m;
    omniroute_combo em em-fin/m em-rst/m or-ok/m;
    omniroute_combo qe q-esc/m oc-ok/m;
    omniroute_combo qr q-raw/m oc-ok/m;

    omniroute_api_token env=OMNI_TEST_API_TOKEN;

    server {
        listen 127.0.0.1:%%PORT_gw%%;

        location /v1/ {
            omniroute_pass;
        }

        location /_omniroute {
            internal;
            include %%PARAMS%%;
            proxy_read_timeout 10s;
        }

        location /api/ {
            omniroute_api;
        }

        location = /metrics {
            omniroute_api;
        }
    }
EOF

$t->run($t->port('gw'));
my $gw = $t->port('gw');

sub api {
    my ($path) = @_;
    my $r = $t->get($gw, $path, Authorization => "Bearer $TOKEN");
    return OmniTest::json($r);
}

# error after metadata, all three formats

for my $case (['an', '/v1/messages', 'an-ok', 'anthropic-messages',
               'Anthropic message_start, ping, event: error'],
              ['oc', '/v1/chat/completions', 'oc-ok', 'openai-chat',
               'Chat role-only chunk, then an error object'],
              ['rf', '/v1/responses', 'rs-ok', 'openai-responses',
               'Responses created, in_progress, response.failed'],
              ['re', '/v1/responses', 'rs-ok', 'openai-responses',
               'Responses created, in_progress, event: error'])
{
    my ($model, $path, $ok, $fixture, $what) = @$case;

    my $r = $t->post_stream($gw, $path,
                            { model => $model, stream => JSON::PP::true });

    is($r->{status}, 200, "$what: the client gets a stream");
    is($r->{headers}{'x-omniroute-connection'}, $ok, "$what: falls over");
    is($r->{headers}{'x-omniroute-attempts'}, '2', "$what: two attempts");
    is($r->{body}, OmniTest::stream_fixture($fixture),
       "$what: the next stream byte for byte, nothing of the failed one");
    cmp_ok($r->{total_time}, '<', 2.5,
           "$what: acted on when it arrived (the provider kept the "
           . "connection open; proxy_read_timeout 10s)");
}

# the failures were recorded, classified like the HTTP errors

my %expect = ('an-err' => ['server_error', 529],
              'oc-err' => ['server_error', 500],
              'rf-err' => ['server_error', 500],
              're-err' => ['rate_limit_exceeded', 429]);

for my $id (sort keys %expect) {
    my $c = $t->connection_state($gw, $id, $TOKEN);
    is($c->{last_error_type}, $expect{$id}[0],
       "R-CLASS-2 $id recorded as $expect{$id}[0]");
    is($c->{last_status}, $expect{$id}[1], "... status $expect{$id}[1]");
}

# a stream that ends before any content falls over too

my $r = $t->post_stream($gw, '/v1/chat/completions',
                        { model => 'em', stream => JSON::PP::true });
is($r->{headers}{'x-omniroute-connection'}, 'or-ok',
   'a stream ending after its role chunk (clean end, then a reset) falls '
   . 'over twice');
is($r->{headers}{'x-omniroute-attempts'}, '3', 'three attempts');
is($r->{body}, OmniTest::stream_fixture('openai-chat-reasoning'),
   'the reasoning stream (comments, reasoning deltas) byte for byte');

is($t->connection_state($gw, 'em-fin', $TOKEN)->{last_error_type},
   'server_error', 'an end without content: like a 502');
is($t->connection_state($gw, 'em-rst', $TOKEN)->{last_error_type}, 'transport',
   'a reset before content: transport');

# in-stream quota errors: quota_exhausted, never a breaker failure

for my $q (['qe', 'q-esc', 'JSON-escaped'], ['qr', 'q-raw', 'plain']) {
    my ($model, $id, $what) = @$q;

    $r = $t->post_stream($gw, '/v1/chat/completions',
                         { model => $model, stream => JSON::PP::true });
    is($r->{headers}{'x-omniroute-connection'}, 'oc-ok',
       "issue 11: a $what in-stream quota error falls over");

    my $c = $t->connection_state($gw, $id, $TOKEN);
    is($c->{last_error_type}, 'quota_exhausted',
       "issue 11: a $what in-stream quota error is quota_exhausted");
    is($c->{last_status}, 429, '... a 429');
    ok($c->{retry_after_ms} > 3000 * 1000,
       '... cooled for long (quota, 1 h)') or diag(explain $c);

    my $h = api('/api/monitoring/health');
    my $p = ref $h->{providers} eq 'HASH' ? $h->{providers}{$id}
          : (grep { ($_->{name} // $_->{provider} // '') eq $id }
                  @{$h->{providers}})[0];
    is($p->{failures}, 0, "issue 11: never a failure of the breaker of $id");
}

# metrics: the fallbacks by reason

my $mt = $t->get($gw, '/metrics', Authorization => "Bearer $TOKEN");
like($mt->{body}, qr/^omniroute_fallbacks_total\{reason="quota_exhausted"\} 2$/m,
     'metrics: two quota fallbacks');
like($mt->{body}, qr/^omniroute_fallbacks_total\{reason="transport"\} 1$/m,
     'metrics: one transport fallback');
like($mt->{body}, qr/^omniroute_fallbacks_total\{reason="rate_limit_exceeded"\} 1$/m,
     'metrics: one rate-limit fallback');

$t->done;
done_testing;
