#!/usr/bin/perl

# R-LEASE-1: a client key's connections= narrow the candidates
# and the per-connection counters follow the connection that was tried:
# attempts, fallbacks and tokens of ok-2 and ok-3 are theirs, not those of
# the model's first route ok-1 (always 503), and equal
# to what each connection's upstream saw. GET /v1/models lists, for a key
# with connections=, only the names with a route on a connection the key
# may use; a key with paths= still lists them.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use OmniTest;
use PromText;

my $t = OmniTest->new;
my $m = $t->mock('p');

my $K23 = 'sk-client-k23-0123456789abcdef';
my $K3 = 'sk-client-k3-0123456789abcdef';
my $KALL = 'sk-client-all-0123456789abcdef';
my $KCHAT = 'sk-client-chat-0123456789abcdef';

$t->write_file('key-ok1', "sk-ok1~status=503\n");
$t->write_file('key-ok2', "sk-ok2~status=503\n");
$t->write_file('key-ok3', "sk-ok3~usage=30:6:2:1\n");
$t->write_file('key-q1', "sk-q1\n");
$t->write_file('client-k23', "$K23\n");
$t->write_file('client-k3', "$K3\n");
$t->write_file('client-all', "$KALL\n");
$t->write_file('client-chat', "$KCHAT\n");

$t->config(<<'EOF');
    omniroute_zone zone=omniroute:1m;

    omniroute_provider p url=http://127.0.0.1:%%PORT_mock_p%%/p
                       breaker_failures=1000;
    omniroute_provider q url=http://127.0.0.1:%%PORT_mock_p%%/q;

    omniroute_connection ok-1 provider=p key_file=%%TESTDIR%%/key-ok1
                         priority=1;
    omniroute_connection ok-2 provider=p key_file=%%TESTDIR%%/key-ok2
                         priority=2;
    omniroute_connection ok-3 provider=p key_file=%%TESTDIR%%/key-ok3
                         priority=3;
    omniroute_connection q1 provider=q key_file=%%TESTDIR%%/key-q1;

    omniroute_model m p/m-up;
    omniroute_model claude q/claude-up;
    omniroute_combo both p/m-up q/claude-up;

    omniroute_client_key k23 file=%%TESTDIR%%/client-k23
                         connections=ok-2,ok-3;
    omniroute_client_key k3 file=%%TESTDIR%%/client-k3 connections=ok-3;
    omniroute_client_key kall file=%%TESTDIR%%/client-all;
    omniroute_client_key kchat file=%%TESTDIR%%/client-chat
                         connections=q1 paths=/v1/chat/;

    server {
        listen 127.0.0.1:%%PORT_gw%%;

        location /v1/ {
            omniroute_pass;
        }

        location /_omniroute {
            internal;
            include %%PARAMS%%;
        }

        location = /metrics {
            omniroute_api;
            omniroute_api_token off;
        }
    }
EOF

$t->run($t->port('gw'));

my $gw = $t->port('gw');
my $chat = '/v1/chat/completions';

sub ask {
    my ($key) = @_;
    return $t->post($gw, $chat, { model => 'm',
                                  messages => [{ role => 'user',
                                                 content => 'hi' }] },
                    Authorization => "Bearer $key");
}

# what each connection's upstream saw, by its key
sub seen {
    my %n;
    for my $q (@{$m->requests}) {
        my ($k) = ($q->{headers}{authorization} // '') =~ /^Bearer sk-(\w+)/;
        $n{$k}++ if defined $k;
    }
    return \%n;
}

sub scrape {
    my ($name) = @_;
    my $r = $t->get($gw, '/metrics');
    is($r->{status}, 200, "$name: metrics answer");
    return PromText::check($t, $r->{body}, $name);
}

sub pair {
    my ($s, $family, $conn, $label, $value) = @_;
    return $s->{"omniroute_$family\{connection=\"$conn\",model=\"m\","
                . "provider=\"p\",$label=\"$value\"}"} // 0;
}

###########################################################################
# ok-1 and ok-2 answer 503 to everything, ok-3 answers

my $before = scrape('fresh');
my $seen0 = seen();

###########################################################################
# k23 (ok-2, ok-3) and k3 (ok-3): ok-2 fails over to ok-3

my %served;
for my $key ($K23, $K23, $K3, $K3, $K3) {
    my $r = ask($key);
    is($r->{status}, 200, 'a limited key is served');
    $served{$r->{headers}{'x-omniroute-connection'} // '-'}++;
}
is_deeply(\%served, { 'ok-3' => 5 }, 'by ok-3 every time');

# the log phase that counts a request's tokens runs after its answer is
# sent: wait (with a deadline) until the fifth answer's tokens are in
my $want = pair($before, 'tokens_total', 'ok-3', 'type', 'prompt') + 5 * 30;
$t->get_until($gw, '/metrics', sub {
    $_[0] =~ /^omniroute_tokens_total\{provider="p",connection="ok-3",model="m",type="prompt"\} (\d+)$/m
        && $1 >= $want
});
my $s = scrape('after the limited requests');
my $seen = seen();
my %new = map { $_ => ($seen->{$_} // 0) - ($seen0->{$_} // 0) }
          qw(ok1 ok2 ok3);

is($new{ok1}, 0, 'ok-1 saw none of the limited requests');
cmp_ok($new{ok2}, '>=', 1, 'ok-2 saw at least the first of k23');
is($new{ok3}, 5, 'ok-3 saw all five');

sub delta {
    my ($family, $conn, $label, $value) = @_;
    return pair($s, $family, $conn, $label, $value)
           - pair($before, $family, $conn, $label, $value);
}

is(delta('connection_attempts_total', 'ok-1', 'reason', 'none'), 0,
   'no success is charged to ok-1');
is(pair($s, 'connection_attempts_total', 'ok-1', 'reason', 'none'), 0,
   'ok-1 never succeeded at all');
is(delta('connection_attempts_total', 'ok-1', 'reason', 'server_error'), 0,
   'nor a failure of the limited requests');
is(delta('connection_attempts_total', 'ok-2', 'reason', 'server_error'),
   $new{ok2}, 'ok-2: its 503s, as many as its upstream saw');
is(delta('connection_fallbacks_total', 'ok-2', 'reason', 'server_error'),
   $new{ok2}, 'ok-2: each fell over');
is(delta('connection_attempts_total', 'ok-2', 'reason', 'none'), 0,
   'ok-2: no success');
is(delta('connection_attempts_total', 'ok-3', 'reason', 'none'), 5,
   'ok-3: its five successes');
is(delta('tokens_total', 'ok-3', 'type', 'prompt'), 5 * 30,
   'ok-3: the prompt tokens of its answers');
is(delta('tokens_total', 'ok-3', 'type', 'completion'), 5 * 6,
   'ok-3: the completion tokens');
is(delta('tokens_total', $_, 'type', 'prompt'), 0,
   "no tokens charged to $_") for qw(ok-1 ok-2);

# an unlimited key tries ok-1 (its own pair gets the 503), then the rest

my $r = ask($KALL);
is($r->{status}, 200, 'an unlimited key is served');
cmp_ok(pair(scrape('after an unlimited request'), 'connection_attempts_total',
            'ok-1', 'reason', 'server_error'),
       '==', seen()->{ok1} // 0, 'ok-1\'s 503s are its own');

###########################################################################
# GET /v1/models: a key's connections= filter the list

sub ids {
    my ($key) = @_;
    my $r = $t->get($gw, '/v1/models', Authorization => "Bearer $key");
    is($r->{status}, 200, 'GET /v1/models');
    my $doc = OmniTest::json($r) || {};
    return [sort map { $_->{id} } @{$doc->{data} || []}];
}

is_deeply(ids($KALL), ['both', 'claude', 'm', 'p/m-up', 'q/claude-up'],
          'a key without limits: every name');
is_deeply(ids($K23), ['both', 'm', 'p/m-up'],
          'connections=ok-2,ok-3: no claude (only q1 serves it)');
is($t->get($gw, '/v1/models/claude',
           Authorization => "Bearer $K23")->{status}, 404,
   'and claude alone is not found for it');
is($t->post($gw, $chat, { model => 'claude' },
            Authorization => "Bearer $K23")->{status}, 403,
   'as asking for it is refused');

is_deeply(ids($KCHAT), ['both', 'claude', 'q/claude-up'],
          'paths=/v1/chat/ with connections=q1: the list, q1\'s names');
is($t->get($gw, '/v1/models/claude',
           Authorization => "Bearer $KCHAT")->{status}, 200,
   'one model of it');
is($t->post($gw, '/v1/embeddings', { model => 'claude' },
            Authorization => "Bearer $KCHAT")->{status}, 403,
   'the key\'s paths= still hold for the rest');

$t->done;

done_testing;
