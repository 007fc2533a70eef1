#!/usr/bin/perl

# R-AFF-1: a session key pins a connection for omniroute_session_affinity,
# for both workers; the pin is honored while the connection is eligible,
# otherwise the session is re-pinned; R-REQ-2 the session header is not
# forwarded.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use OmniTest;

my $t = OmniTest->new;
my $m = $t->mock('p');

$t->write_file("key-$_", "sk-$_\n") for qw(a b c);

$t->config(<<'EOF2');
    omniroute_zone zone=omniroute:1m;

    omniroute_provider p url=http://127.0.0.1:%%PORT_mock_p%%/v1;
    omniroute_connection a provider=p key_file=%%TESTDIR%%/key-a;
    omniroute_connection b provider=p key_file=%%TESTDIR%%/key-b;
    omniroute_connection c provider=p key_file=%%TESTDIR%%/key-c;

    omniroute_combo rr strategy=round-robin p/m;

    server {
        listen 127.0.0.1:%%PORT_gw%% reuseport;

        location /v1/ {
            omniroute_pass;
            omniroute_session_affinity 1h;
        }

        location /nopin/ {
            omniroute_pass;
        }

        location /_omniroute {
            internal;
            include %%PARAMS%%;
        }
    }
EOF2

$t->run($t->port('gw'));
my $gw = $t->port('gw');

sub conn {
    my ($path, %h) = @_;
    my $r = $t->post($gw, $path, { model => 'rr' }, %h);
    return $r->{headers}{'x-omniroute-connection'} // 'none';
}

my %s1 = map { conn('/v1/chat', 'X-Session-Id' => 'session-one') => 1 } 1 .. 12;
is(scalar keys %s1, 1, 'R-AFF-1 twelve requests of one session: one connection');

my %none = map { conn('/v1/chat') => 1 } 1 .. 6;
is(scalar keys %none, 3, 'requests without a session still rotate');

my %nopin = map { conn('/nopin/chat', 'X-Session-Id' => 'session-one') => 1 }
    1 .. 6;
is(scalar keys %nopin, 3, 'R-AFF-1 affinity is off where it is not set');

my ($pinned) = keys %s1;
my %codex = map { conn('/v1/chat', 'x-codex-session-id' => 'codex-7') => 1 }
    1 .. 6;
is(scalar keys %codex, 1, 'R-AFF-1 x-codex-session-id pins too');

# the pinned connection starts failing (new key, reload: the shared state
# and the pin stay): the session moves and stays on the new connection
$t->write_file("key-$pinned", "sk-$pinned~status=503\n");
$t->reload;
$m->clear;
my $r = $t->post($gw, '/v1/chat', { model => 'rr' },
                 'X-Session-Id' => 'session-one');
is($r->{headers}{'x-omniroute-attempts'}, '2',
   'R-AFF-1 the pin was honored: the pinned connection was tried first');
is($m->requests->[0]{headers}{authorization}, "Bearer sk-$pinned~status=503",
   'R-AFF-1 (the provider saw the pinned connection first)');

my %moved = map { conn('/v1/chat', 'X-Session-Id' => 'session-one') => 1 }
    1 .. 8;
is(scalar keys %moved, 1, 'R-AFF-1 re-pinned after the failure: one connection');
ok(!$moved{$pinned}, 'R-AFF-1 not the failing one');

ok(!grep({ exists $_->{headers}{'x-session-id'}
           || exists $_->{headers}{'x-codex-session-id'} } @{$m->requests}),
   'R-REQ-2 no session header reached the provider');

$t->done;
done_testing;
