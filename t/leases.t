#!/usr/bin/perl

# R-LEASE-2..4 on one node (2 workers, no Redis): POST
# /api/v1/session-leases acquire / renew / release with a client key of
# scope lease:exclusive; the owner token ("vlo_" + 43 base64url) is sent
# once and only its SHA-256 is kept (the zone is read back to check);
# generations increment on each (re)binding and a stale one is refused
# before any provider call; a leased connection is its owner's alone;
# when leases hold every free candidate: 429 lease-capacity-unavailable
# with Retry-After; leases expire, are listed and revocable in the admin
# API; bad input is a 4xx JSON that changes nothing; two workers racing
# for the last connection: exactly one wins.

use strict;
use warnings;
no warnings 'portable';

use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use JSON::PP;
use Digest::SHA qw(sha256_hex);
use Time::HiRes qw(sleep time);
use OmniTest;
use RedisServer;

my $t = OmniTest->new;
my $m = $t->mock('p');

my $LK = 'sk-lease-key-one-0123456789';
my $LK2 = 'sk-lease-key-two-0123456789';
my $PLAIN = 'sk-plain-key-000-0123456789';

$t->write_file("key-$_", "sk-up-$_\n") for qw(a1 a2);
$t->write_file('key-b1', "sk-up-b1~status=503\n");
$t->write_file('free', "sk-free-key-000-0123456789\n");
$t->write_file('lk', "$LK\n");
$t->write_file('lk2', "$LK2\n");
$t->write_file('plain', "$PLAIN\n");

$t->config(<<'EOF');
    omniroute_zone zone=omniroute:1m;

    omniroute_provider alpha url=http://127.0.0.1:%%PORT_mock_p%%/alpha;
    omniroute_provider beta url=http://127.0.0.1:%%PORT_mock_p%%/beta;

    omniroute_connection a1 provider=alpha key_file=%%TESTDIR%%/key-a1
                         priority=1;
    omniroute_connection a2 provider=alpha key_file=%%TESTDIR%%/key-a2
                         priority=2;
    omniroute_connection b1 provider=beta key_file=%%TESTDIR%%/key-b1;

    omniroute_client_key lk file=%%TESTDIR%%/lk connections=a1,a2
                         scope=lease:exclusive;
    omniroute_client_key lk2 file=%%TESTDIR%%/lk2 connections=a1,a2
                         scope=lease:exclusive;
    omniroute_client_key plain file=%%TESTDIR%%/plain connections=a1,a2;
    omniroute_client_key free file=%%TESTDIR%%/free;

    omniroute_combo mixed alpha/m beta/m wait=off;  # answers, no wait

    omniroute_lease_ttl 30s max=60s;

    log_format leases '$request_uri key=$omniroute_client_key '
                      'conn=$omniroute_connection status=$status '
                      '"$http_x_omniroute_lease_generation"';

    server {
        listen 127.0.0.1:%%PORT_gw%%;
        access_log %%TESTDIR%%/logs/leases.log leases;

        location /v1/ {
            omniroute_pass;
        }

        location = /api/v1/session-leases {
            omniroute_session_leases;
        }

        location /_omniroute {
            internal;
            include %%PARAMS%%;
        }

        location /admin/ {
            omniroute_api prefix=/admin;
            omniroute_api_token off;
        }
    }
EOF

$t->run($t->port('gw'));

my $gw = $t->port('gw');
my $LEASES = '/api/v1/session-leases';
my $chat = '/v1/chat/completions';
my @tokens;

sub lease {
    my ($key, $body, %h) = @_;
    my $r = $t->post($gw, $LEASES, $body,
                     ($key ? (Authorization => "Bearer $key") : ()), %h);
    $r->{doc} = OmniTest::json($r);
    if ($r->{doc} && $r->{doc}{lease} && $r->{doc}{lease}{owner}) {
        push @tokens, $r->{doc}{lease}{owner};
    }
    return $r;
}

sub infer {
    my ($key, $owner, $gen, %o) = @_;
    my %h = (Authorization => "Bearer $key");
    $h{'X-OmniRoute-Lease-Owner'} = $owner if defined $owner;
    $h{'X-OmniRoute-Lease-Generation'} = $gen if defined $gen;
    return $t->post($gw, $chat, { model => $o{model} // 'alpha/m' }, %h);
}

sub is_error {
    my ($r, $status, $code, $name) = @_;
    is($r->{status}, $status, "$name: status $status");
    my $doc = OmniTest::json($r);
    ok($doc && ref $doc->{error} eq 'HASH' && defined $doc->{error}{message}
       && defined $doc->{error}{type}, "$name: OpenAI error shape")
        or diag($r->{body});
    is($doc && $doc->{error}{code}, $code, "$name: code $code")
        or diag($r->{body});
    return $doc || {};
}

sub admin_leases {
    my $r = $t->get($gw, '/admin/api/resilience/leases');
    return OmniTest::json($r) || {};
}

sub state_of { encode_json([sort map { "$_->{connection}:$_->{key}:"
                                       . "$_->{generation}:$_->{expires_at}" }
                            @{admin_leases()->{leases}}]) }

sub seen { scalar @{$m->requests} }

sub code_of { (OmniTest::json($_[0]) || {})->{error}{code} // '' }

# the shared memory of a worker: every rw-s mapping
sub shm_dump {
    my ($pid) = RedisServer::worker_pids($t);
    open my $maps, '<', "/proc/$pid/maps" or return '';
    open my $mem, '<:raw', "/proc/$pid/mem" or return '';
    my $all = '';
    while (<$maps>) {
        my ($from, $to, $perm) = /^([0-9a-f]+)-([0-9a-f]+) (\S+)/ or next;
        next unless $perm eq 'rw-s';
        my $len = hex($to) - hex($from);
        next if $len > 64 * 1024 * 1024;
        sysseek($mem, hex($from), 0) or next;
        my $buf = '';
        sysread($mem, $buf, $len);
        $all .= $buf;
    }
    return $all;
}

###########################################################################
# acquire

my $t0 = time * 1000;
my $r = lease($LK, { action => 'acquire' });
is($r->{status}, 200, 'acquire') or diag($r->{body});
my $l = $r->{doc}{lease};
like($l->{owner}, qr/^vlo_[A-Za-z0-9_-]{43}$/,
     'R-LEASE-2 the owner: vlo_ and 43 base64url characters');
is($l->{generation}, 1, 'R-LEASE-2 generation 1');
is($l->{connection}, 'a1', 'the first connection of the key');
is($l->{key}, 'lk', 'of the key');
is($l->{state}, 'active', 'active');
ok($l->{expires_at} >= $t0 + 29000 && $l->{expires_at} <= time * 1000 + 30000,
   'expires after the default ttl (30s)');
is($l->{ttl_s}, 30, 'ttl_s');
my $OWNER = $l->{owner};

my $shm = shm_dump();

SKIP: {
    skip 'the workers\' memory cannot be read (ptrace)', 3
        unless length $shm > 100000;

    ok(length $shm > 100000, 'the zones can be read back');
    ok(index($shm, sha256_hex($OWNER)) >= 0,
       'R-LEASE-2 the zone keeps the SHA-256 of the owner');
    ok(index($shm, $OWNER) < 0, 'R-LEASE-2 and never the owner token');
}

# a managed request

$m->clear;
$r = infer($LK, $OWNER, 1);
is($r->{status}, 200, 'a managed request') or diag($r->{body});
is($r->{headers}{'x-omniroute-connection'}, 'a1', 'on the leased connection');
my $got = $m->requests->[0];
ok(!grep({ /lease|omniroute/i } keys %{$got->{headers}}),
   'no lease header reaches the provider');
ok(index(encode_json($got), $OWNER) < 0, 'nor the owner token');

# the leased connection is its owner's alone

$r = infer($PLAIN, undef, undef);
is($r->{status}, 200, 'an unmanaged request of another key');
is($r->{headers}{'x-omniroute-connection'}, 'a2',
   'passes over the leased a1 (priority 1) to a2');
$r = infer($LK, undef, undef);
is($r->{headers}{'x-omniroute-connection'}, 'a2',
   'so does an unmanaged request of the lease\'s own key');

# a second lease gets the other connection; then capacity is gone

$r = lease($LK2, { action => 'acquire', ttl_s => 2 });
is($r->{status}, 200, 'another key acquires');
is($r->{doc}{lease}{connection}, 'a2', 'the connection still free');
is($r->{doc}{lease}{ttl_s}, 2, 'for the ttl it asked');
my $OWNER2 = $r->{doc}{lease}{owner};
isnt($OWNER2, $OWNER, 'another owner');

$m->clear;
$r = infer($PLAIN, undef, undef);
my $doc = is_error($r, 429, 'lease-capacity-unavailable',
                   'R-LEASE-4 every free candidate is leased');
is($doc->{state}, 'waiting-for-capacity', 'R-LEASE-4 state');
ok($r->{headers}{'retry-after'} >= 1 && $r->{headers}{'retry-after'} <= 2,
   'R-LEASE-4 Retry-After from the earliest expiry (2s)')
    or diag($r->{headers}{'retry-after'});
is($doc->{error}{type}, 'rate_limit_error', 'a rate limit error');
is(seen(), 0, 'and no provider call');

$r = lease($LK, { action => 'acquire' });
$doc = is_error($r, 429, 'lease-capacity-unavailable',
                'R-LEASE-4 acquire when every connection is held');
is($doc->{state}, 'waiting-for-capacity', 'state waiting-for-capacity');
like($r->{headers}{'retry-after'}, qr/^[12]$/, 'with Retry-After');

is(infer($PLAIN, undef, undef, model => 'beta/m')->{status}, 403,
   'a model on no connection of the key keeps its own answer (403)');

# b1 fails and cools down: with a1 and a2 leased, "mixed" has no free
# candidate (429); "beta/m" has none at all, leases or not (503)

my $FREE = 'sk-free-key-000-0123456789';
is(infer($FREE, undef, undef, model => 'beta/m')->{status}, 503,
   'b1 fails (the provider\'s 503)');
is(code_of(infer($FREE, undef, undef, model => 'beta/m')),
   'all_targets_cooling_down',
   'R-LEASE-4 ordinary empty eligibility keeps its 503');
$r = infer($FREE, undef, undef, model => 'mixed');
is(code_of($r), 'lease-capacity-unavailable',
   'R-LEASE-4 leased and cooling candidates: 429');

# expiry

sleep(2.2);

is_error(infer($LK2, $OWNER2, 1), 410, 'lease_expired',
         'an expired lease');
is_error(lease($LK2, { action => 'renew', owner => $OWNER2,
                       generation => 1 }),
         410, 'lease_expired', 'renew after expiry');
is_error(lease($LK2, { action => 'release', owner => $OWNER2,
                       generation => 1 }),
         410, 'lease_expired', 'release after expiry');
$r = infer($PLAIN, undef, undef);
is($r->{status}, 200, 'its connection is free again');
is($r->{headers}{'x-omniroute-connection'}, 'a2', 'a2');

$r = lease($LK2, { action => 'acquire', owner => $OWNER2, generation => 1 });
is($r->{status}, 200, 'R-LEASE-2 an expired lease can be rebound');
is($r->{doc}{lease}{generation}, 2, 'R-LEASE-2 with the next generation');
ok(!defined $r->{doc}{lease}{owner}, 'the token is not sent again');
is(lease($LK2, { action => 'release', owner => $OWNER2, generation => 2 })
   ->{status}, 200, 'and released');

# renew

my $exp = admin_leases()->{leases}[0]{expires_at};
sleep(0.05);
$r = lease($LK, { action => 'renew', owner => $OWNER, generation => 1,
                  ttl_s => 40 });
is($r->{status}, 200, 'renew');
ok($r->{doc}{lease}{expires_at} > $exp, 'a later expiry');
is($r->{doc}{lease}{generation}, 1, 'the same generation');
ok(!defined $r->{doc}{lease}{owner}, 'no token in the answer');

# bad input: a 4xx JSON, nothing changed

my $before = state_of();

is_error(lease($LK, { action => 'renew', owner => $OWNER, generation => 2 }),
         409, 'lease_generation_mismatch', 'renew, wrong generation');
is_error(lease($LK, { action => 'release', owner => $OWNER,
                      generation => 7 }),
         409, 'lease_generation_mismatch', 'release, wrong generation');
my $stranger = 'vlo_' . ('Q' x 42) . 'A';
is_error(lease($LK, { action => 'renew', owner => $stranger,
                      generation => 1 }),
         404, 'lease_not_found', 'renew, an unknown owner');
is_error(lease($LK2, { action => 'renew', owner => $OWNER,
                       generation => 1 }),
         404, 'lease_not_found', 'renew, the lease of another key');
is_error(lease($LK, 'not json {'), 400, 'invalid_json', 'not JSON');
is_error(lease($LK, '[1]'), 400, 'invalid_json', 'not an object');
is_error(lease($LK, ''), 400, 'invalid_json', 'no body');
is_error(lease($LK, '{"action":"acquire","action":"renew"}'), 400,
         'invalid_json', 'a duplicate key');
is_error(lease($LK, { action => 'acquire', force => JSON::PP::true }),
         400, 'unknown_field', 'an unknown field');
is_error(lease($LK, { owner => $OWNER }), 400, 'missing_field', 'no action');
is_error(lease($LK, { action => 'steal' }), 400, 'invalid_action',
         'an unknown action');
is_error(lease($LK, { action => 5 }), 400, 'invalid_type',
         'an action that is not a string');
is_error(lease($LK, { action => 'renew' }), 400, 'missing_field',
         'renew without owner');
is_error(lease($LK, { action => 'release', owner => $OWNER }), 400,
         'missing_field', 'release without generation');
is_error(lease($LK, { action => 'renew', owner => 'vlo_short',
                      generation => 1 }),
         400, 'invalid_owner', 'a malformed owner');
is_error(lease($LK, { action => 'renew', owner => 12, generation => 1 }),
         400, 'invalid_type', 'an owner that is not a string');
for my $g (0, -1, 'x', 1.5, '01', 9007199254740992) {
    is_error(lease($LK, { action => 'renew', owner => $OWNER,
                          generation => $g }),
             400, 'invalid_generation', "generation $g");
}
is_error(lease($LK, { action => 'acquire', generation => 1 }), 400,
         'invalid_request', 'a generation without owner');
is_error(lease($LK, { action => 'renew', owner => $OWNER, generation => 1,
                      ttl_s => 0 }), 400, 'out_of_range', 'ttl_s 0');
is_error(lease($LK, { action => 'renew', owner => $OWNER, generation => 1,
                      ttl_s => 61 }), 400, 'out_of_range',
         'ttl_s over the maximum');
is_error(lease($LK, { action => 'renew', owner => $OWNER, generation => 1,
                      ttl_s => '5' }), 400, 'invalid_type',
         'ttl_s as a string');
is_error(lease($LK, { action => 'release', owner => $OWNER, generation => 1,
                      ttl_s => 5 }), 400, 'invalid_request',
         'ttl_s with release');
is_error(lease($LK, { action => 'renew', owner => $OWNER, generation => 1,
                      connection => 'a1' }), 400, 'invalid_request',
         'connection with renew');
is_error(lease($LK, { action => 'acquire', connection => 'b1' }), 403,
         'connection_not_allowed', 'a connection the key may not lease');
is_error(lease($LK, { action => 'acquire', connection => 'nope' }), 403,
         'connection_not_allowed', 'an unknown connection');
is_error(lease($PLAIN, { action => 'acquire' }), 403,
         'lease_scope_required', 'a key without the lease scope');
is_error(lease(undef, { action => 'acquire' }), 401, 'invalid_api_key',
         'no key');
is_error(lease('sk-wrong-000000000000000', { action => 'acquire' }), 401,
         'invalid_api_key', 'a wrong key');
is_error($t->get($gw, $LEASES, Authorization => "Bearer $LK"), 405,
         'method_not_allowed', 'GET');
is_error(lease($LK, '{"action":"acquire","pad":"' . ('x' x 17000) . '"}'),
         413, 'request_too_large', 'a body over 16k');

is(state_of(), $before, 'none of them changed anything');

# managed requests with bad lease headers: refused before any provider call

$m->clear;
is_error(infer($LK, $OWNER, undef), 400, 'invalid_lease_headers',
         'the owner header alone');
is_error(infer($LK, undef, 1), 400, 'invalid_lease_headers',
         'the generation header alone');
is_error(infer($LK, 'vlo_nope', 1), 400, 'invalid_lease_headers',
         'a malformed owner');
is_error(infer($LK, $OWNER, 'one'), 400, 'invalid_lease_headers',
         'a malformed generation');
is_error(infer($PLAIN, $OWNER, 1), 403, 'lease_scope_required',
         'a key without the scope');
is_error(infer($LK, $stranger, 1), 404, 'lease_not_found', 'an unknown owner');
is_error(infer($LK2, $OWNER, 1), 404, 'lease_not_found',
         'the lease of another key');
is_error(infer($LK, $OWNER, 1, model => 'beta/m'), 409,
         'lease_connection_mismatch',
         'a model the leased connection does not serve');
is(seen(), 0, 'no provider saw any of them');

# rebinding: the next generation, the old one is stale before dispatch

$r = lease($LK, { action => 'acquire', owner => $OWNER, generation => 1 });
is($r->{status}, 200, 'R-LEASE-2 rebinding');
is($r->{doc}{lease}{generation}, 2, 'R-LEASE-2 the generation increments');
is($r->{doc}{lease}{connection}, 'a1', 'it keeps its free connection');

$m->clear;
is_error(infer($LK, $OWNER, 1), 409, 'lease_generation_mismatch',
         'R-LEASE-3 a stale generation');
is(seen(), 0, 'R-LEASE-3 rejected before any upstream request');
$r = infer($LK, $OWNER, 2);
is($r->{status}, 200, 'the current generation is served');
is($r->{headers}{'x-omniroute-connection'}, 'a1', 'on a1');

$r = lease($LK, { action => 'acquire', owner => $OWNER, generation => 2,
                  connection => 'a2' });
is($r->{status}, 200, 'rebinding to another connection asked for');
is($r->{doc}{lease}{connection}, 'a2', 'moves to it');
is($r->{doc}{lease}{generation}, 3, 'generation 3');
$r = infer($PLAIN, undef, undef);
is($r->{headers}{'x-omniroute-connection'}, 'a1',
   'its previous connection is free');
is(infer($LK, $OWNER, 3)->{headers}{'x-omniroute-connection'}, 'a2',
   'managed requests follow the lease');

# the lease narrows "mixed" (a1, a2, b1) to a2: its counters are a2's
sub mixed_ok {
    my ($conn) = @_;
    my $b = $t->get($gw, '/admin/metrics')->{body};
    my ($n) = $b =~ /^omniroute_connection_attempts_total\{provider="alpha",
                      connection="\Q$conn\E",model="mixed",
                      reason="none"\}\ (\d+)$/mx;
    return $n // 0;
}
my $list = OmniTest::json($t->get($gw, '/v1/models',
                                  Authorization => "Bearer $LK",
                                  'X-OmniRoute-Lease-Owner' => $OWNER,
                                  'X-OmniRoute-Lease-Generation' => 3));
is_deeply([sort map { $_->{id} } @{$list->{data} || []}],
          ['alpha/m', 'mixed'],
          'GET /v1/models with the lease: the names a2 serves');
my @before = map { mixed_ok($_) } qw(a1 a2);
$r = infer($LK, $OWNER, 3, model => 'mixed');
is($r->{headers}{'x-omniroute-connection'}, 'a2', 'a combo, on the lease\'s a2');
is(mixed_ok('a2') - $before[1], 1, 'its success is counted under a2');
is(mixed_ok('a1') - $before[0], 0, 'not under a1, the combo\'s first route');

# admin API

$doc = admin_leases();
is($doc->{count}, 1, 'the admin API lists the active lease');
is_deeply([map { [$_->{connection}, $_->{key}, $_->{generation}] }
           @{$doc->{leases}}], [['a2', 'lk', 3]],
          'connection, key, generation');
ok(!grep({ /owner|hash/ } map { keys %$_ } @{$doc->{leases}}),
   'no owner, no hash');

is(OmniTest::json($t->get($gw, '/admin/api/resilience/leases?key=lk'))
       ->{count}, 1, 'GET ?key= of a declared key: its leases');
is_error($t->get($gw, '/admin/api/resilience/leases?key=zz'),
         404, 'unknown_key', 'GET ?key= of an unknown key: 404, as DELETE');
is_error($t->http($gw, OmniTest::request_text('DELETE',
                       '/admin/api/resilience/leases', '{"key":"zz"}')),
         404, 'unknown_key', 'DELETE of an unknown key');
is_error($t->http($gw, OmniTest::request_text('DELETE',
                       '/admin/api/resilience/leases', '{}',
                       'Content-Type' => 'application/json')),
         400, 'invalid_request', 'DELETE without connection or key');
is_error($t->http($gw, OmniTest::request_text('DELETE',
                       '/admin/api/resilience/leases',
                       '{"connection":"zz"}')),
         404, 'unknown_connection', 'DELETE of an unknown connection');
$r = $t->http($gw, OmniTest::request_text('DELETE',
                   '/admin/api/resilience/leases', '{"connection":"a2"}'));
is($r->{status}, 200, 'DELETE revokes');
is_deeply(OmniTest::json($r), { revoked => 1, connections => ['a2'] },
          'the revoked connections');
is(admin_leases()->{count}, 0, 'no lease left');
is_error(infer($LK, $OWNER, 3), 404, 'lease_not_found',
         'a revoked lease is gone');
$r = $t->http($gw, OmniTest::request_text('DELETE',
                   '/admin/api/resilience/leases', '{"key":"lk"}'));
is_deeply(OmniTest::json($r), { revoked => 0, connections => [] },
          'DELETE by key: idempotent');

# release

$r = lease($LK, { action => 'acquire' });
my $OWNER3 = $r->{doc}{lease}{owner};
is($r->{doc}{lease}{generation}, 1, 'a new owner starts at 1 again');
$r = lease($LK, { action => 'release', owner => $OWNER3, generation => 1 });
is($r->{status}, 200, 'release');
is($r->{doc}{lease}{state}, 'released', 'released');
is_error(infer($LK, $OWNER3, 1), 404, 'lease_not_found',
         'a released lease is gone');
is_error(lease($LK, { action => 'release', owner => $OWNER3,
                      generation => 1 }),
         404, 'lease_not_found', 'releasing twice');

# two workers racing for the last free connection: exactly one wins

my @pids = RedisServer::worker_pids($t);
is(scalar @pids, 2, 'two workers');

$r = lease($LK2, { action => 'acquire', connection => 'a1' });
is($r->{doc}{lease}{connection}, 'a1', 'a1 taken, a2 is the last one');

my @socks = map { $t->start_post($gw, $LEASES,
                                 encode_json({ action => 'acquire' }),
                                 Authorization => 'Bearer '
                                                  . ($_ % 2 ? $LK : $LK2),
                                 'Content-Type' => 'application/json') }
            1 .. 16;
my @res = map { OmniTest::finish($_) } @socks;
my @won = grep { $_->{status} == 200 } @res;
my @lost = grep { $_->{status} == 429 } @res;
is(scalar @won, 1, 'R-LEASE-3 one acquire of 16 wins the last connection');
is(scalar @lost, 15, 'the others get 429');
my $w = OmniTest::json($won[0]) // {};
is($w->{lease}{connection}, 'a2', 'the winner holds a2');
push @tokens, $w->{lease}{owner} if $w->{lease};
is(admin_leases()->{count}, 2, 'two leases, one per connection');

# the token appears nowhere but in the acquire answers

$shm = shm_dump();
my $logs = $t->read_file('logs/leases.log') . $t->error_log
           . $t->read_file('logs/access.log');
my $metrics = $t->get($gw, '/admin/metrics')->{body};
my $api = $t->get($gw, '/admin/api/resilience/leases')->{body};

my ($in_shm, $in_logs, $in_api) = (0, 0, 0);
for my $tok (@tokens) {
    $in_shm++ if index($shm, $tok) >= 0;
    $in_logs++ if index($logs, $tok) >= 0 || index($metrics, $tok) >= 0;
    $in_api++ if index($api, $tok) >= 0 || index($api, sha256_hex($tok)) >= 0;
}
ok(@tokens >= 5, scalar(@tokens) . ' owner tokens made');
ok(length $shm > 100000 ? $in_shm == 0 : 1,
   'R-LEASE-2 no owner token in the zone');
is($in_logs, 0, 'no owner token in the logs or the metrics');
is($in_api, 0, 'no owner token nor hash in the admin API');

like($metrics, qr/^omniroute_leases_active 2$/m, 'metrics: active leases');
like($metrics, qr/^omniroute_lease_capacity_rejections_total [1-9]\d*$/m,
     'metrics: 429 answers');
like($metrics, qr/^omniroute_zone_records\{table="lease"\} \d+$/m,
     'the lease table in the zone records');

like($t->error_log,
     qr/omniroute lease acquired: key "lk", connection "a1", generation 1/,
     'acquisitions are logged by key, connection and generation');

$t->done;

done_testing;
