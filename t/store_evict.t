#!/usr/bin/perl

# The zone's eviction classes: 100,000 distinct session ids (one session
# pin each) through a 1m zone with 2 workers evict only session pins; an
# OPEN breaker, a connection cooldown, a credits_exhausted terminal state
# and a model lockout made before stay in force, read through the admin
# API and through routing; the pins stay within their half of the zone;
# nothing is logged at alert level.  Strategy state writes no events.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use IO::Select;
use IO::Socket::INET;
use JSON::PP;
use Time::HiRes qw(time sleep);
use OmniTest;
use OmniStore qw(chat api metrics reasons);

my $t = OmniTest->new;
my $m = $t->mock('p');

my $TOKEN = 'adm-0123456789-abcdefghij';
$ENV{OMNI_TEST_API_TOKEN} = $TOKEN;

$t->write_file('key-b1', "sk-b1~status=503\n");
$t->write_file('key-c1', "sk-c1~status=429,retry=600\n");
$t->write_file('key-t1', "sk-t1~status=402\n");
$t->write_file('key-l1', "sk-l1~status=503\n");
$t->write_file('key-f1', "sk-f1\n");

$t->config(<<"EOF");
    omniroute_zone zone=omniroute:1m;

    # local profile: 2 failures open the breaker, here for 10 minutes
    omniroute_provider brk url=http://127.0.0.1:%%PORT_mock_p%%/brk
                       kind=local breaker_reset=10m cooldown_base=1ms
                       cooldown_max=5ms;
    omniroute_provider cd url=http://127.0.0.1:%%PORT_mock_p%%/cd;
    omniroute_provider lo url=http://127.0.0.1:%%PORT_mock_p%%/lo
                       lockout=on;
    omniroute_provider fast url=http://127.0.0.1:%%PORT_up%%/v1;

    omniroute_model_lockout off base=10m max=1h;

    omniroute_connection b1 provider=brk key_file=%%TESTDIR%%/key-b1;
    omniroute_connection c1 provider=cd key_file=%%TESTDIR%%/key-c1
                         priority=1;
    omniroute_connection t1 provider=cd key_file=%%TESTDIR%%/key-t1
                         priority=2;
    omniroute_connection l1 provider=lo key_file=%%TESTDIR%%/key-l1;
    omniroute_connection f1 provider=fast key_file=%%TESTDIR%%/key-f1;

    omniroute_combo rr strategy=round-robin fast/m fast/n;

    omniroute_api_token env=OMNI_TEST_API_TOKEN;

    server {
        listen 127.0.0.1:%%PORT_up%%;
        access_log off;

        location / {
            default_type application/json;
            return 200 '{"id":"x","object":"chat.completion","choices":[]}';
        }
    }

${\ OmniStore::gateway_server(
    head => ['access_log off', 'keepalive_requests 1000000'],
    v1 => ['omniroute_max_attempts 2', 'omniroute_session_affinity 1h'])}
EOF

$t->run($t->port('gw'), $t->port('up'));
my $gw = $t->port('gw');
OmniStore::node($t, $TOKEN);

###########################################################################
# the protective state: breaker, cooldown, terminal state, lockout

for (1 .. 2) {
    chat('brk/m');
    sleep(0.05);
}
chat('cd/m');
chat('lo/big');

sub protective_state_in_force {
    my ($when) = @_;

    my $h = api('GET', '/api/monitoring/health')->{json};
    is($h && $h->{providers}{brk}{state}, 'OPEN', "$when: breaker OPEN");

    my $cd = api('GET', '/api/resilience/cooldowns?provider=cd')->{json};
    my %c = map { $_->{id} => $_ } @{$cd ? $cd->{connections} : []};
    is($c{c1} && $c{c1}{status}, 'cooldown', "$when: c1 cooling down");
    ok($c{c1} && $c{c1}{retry_after_ms} > 500 * 1000,
       "$when: for the provider's Retry-After of 600 s");
    is($c{t1} && $c{t1}{terminal}, 'credits_exhausted',
       "$when: t1 in its terminal state");

    my $lo = api('GET', '/api/resilience/model-cooldowns?connection=l1')
        ->{json};
    is($lo && $lo->{count}, 1, "$when: one model lockout of l1");
    is($lo && $lo->{lockouts}[0]{model}, 'big', "$when: on model big");

    # and routing sees the same
    my $r = chat('brk/m');
    is($r->{status}, 503, "$when: brk is not tried");
    is(reasons($r), 'b1:circuit_open', "$when: the breaker is open");

    $r = chat('cd/m');
    is($r->{status}, 503, "$when: cd is not tried");
    is(reasons($r), 'c1:provider_cooldown,t1:terminal',
       "$when: cooldown and terminal state");

    $r = chat('lo/big');
    is(reasons($r), 'l1:model_lockout', "$when: model big is locked");
}

my $before = scalar @{$m->requests};
protective_state_in_force('before the flood');

###########################################################################
# 100,000 distinct session ids, pipelined over keep-alive connections

sub flood {
    my ($n, $conns, $depth) = @_;

    my $body = encode_json({ model => 'rr', messages => [] });
    my $len = length $body;
    my ($sent, $ok, $bad) = (0, 0, 0);
    my (%st, $sel);

    $sel = IO::Select->new;

    for (1 .. $conns) {
        my $s = IO::Socket::INET->new(PeerAddr => "127.0.0.1:$gw")
            or die "connect: $!";
        $s->blocking(0);
        $st{fileno $s} = { s => $s, buf => '', pending => 0 };
        $sel->add($s);
    }

    my $deadline = time + 120;

    while (($ok + $bad < $n) && time < $deadline) {

        for my $c (values %st) {
            next if $c->{pending} || $sent >= $n;
            my $out = '';
            while ($c->{pending} < $depth && $sent < $n) {
                $sent++;
                $out .= "POST /v1/chat/completions HTTP/1.1\r\n"
                      . "Host: localhost\r\n"
                      . "X-Session-Id: flood-$sent\r\n"
                      . "Content-Type: application/json\r\n"
                      . "Content-Length: $len\r\n\r\n$body";
                $c->{pending}++;
            }
            $c->{s}->blocking(1);
            print { $c->{s} } $out;
            $c->{s}->blocking(0);
        }

        for my $s ($sel->can_read(5)) {
            my $c = $st{fileno $s};
            my $got = sysread($s, $c->{buf}, 262144, length $c->{buf});
            die "connection closed after $ok answers" unless $got;

            for ( ;; ) {
                my $end = index($c->{buf}, "\r\n\r\n");
                last if $end < 0;
                my $head = substr($c->{buf}, 0, $end);
                my ($status) = $head =~ m{^HTTP/1\.1 (\d+)};
                my ($clen) = $head =~ /^Content-Length:\s*(\d+)/mi;
                die "no Content-Length: $head" unless defined $clen;
                last if length($c->{buf}) < $end + 4 + $clen;
                substr($c->{buf}, 0, $end + 4 + $clen, '');
                $c->{pending}--;
                if ($status == 200) { $ok++ } else { $bad++ }
            }
        }
    }

    close $_->{s} for values %st;
    return ($ok, $bad);
}

my $t0 = time;
my ($ok, $bad) = flood(100_000, 4, 16);
my $took = time - $t0;

is($ok, 100_000, '100,000 requests with distinct session ids answered');
is($bad, 0, 'none failed');
diag(sprintf('flood: %.1f s, %.0f requests/s', $took, 100_000 / $took))
    if $ENV{TEST_VERBOSE};

###########################################################################
# the pins were evicted, only they

my $v = metrics();
my $pins = $v->{'omniroute_zone_records{table="session_pin"}'} // 0;
ok($pins > 500, "the zone holds the most recent pins ($pins)");
ok($v->{omniroute_zone_evictions_total} >= 100_000 - $pins,
   'the older ones were evicted');
is($v->{omniroute_zone_alloc_failures_total}, 0, 'no record was refused');
ok($v->{omniroute_zone_used_bytes} < $v->{omniroute_zone_size_bytes},
   'the zone is not full: pins use at most half of it');
is($v->{'omniroute_zone_records{table="breaker"}'}, 2,
   'breaker records are all there (brk, lo)');
is($v->{'omniroute_zone_records{table="connection"}'}, 3,
   'connection records are all there (c1, t1, l1)');
is($v->{'omniroute_zone_records{table="lockout"}'}, 1,
   'the lockout record is there');

is(scalar @{$m->requests}, $before,
   'the failing providers were not asked meanwhile');

protective_state_in_force('after the flood');

# the flood's most recent session is still pinned: a pin keeps it on one
# target of the round-robin combo
my %seen = map {
    (chat('rr', 'X-Session-Id' => 'flood-100000')->{headers}
         {'x-omniroute-connection'} // 'none') => 1
} 1 .. 4;
is(scalar keys %seen, 1, 'the last session is still pinned');

###########################################################################
# strategy state is node-local: its changes write no events; the
# round-robin flood wrote one per pin change only

like($v->{omniroute_zone_events_lost_total} // '', qr/^\d+$/,
     'omniroute_zone_events_lost_total is exported');

unlike($t->error_log, qr/\[alert\]|could not allocate/,
       'no allocation alert');

$t->done;
done_testing;
