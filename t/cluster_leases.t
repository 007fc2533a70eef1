#!/usr/bin/perl

# R-LEASE-3 across nodes: two nginx nodes (2 workers each) and a real
# redis-server.  A lease acquired on one node holds its connection on the
# other (one Lua script per call, atomic in Redis); a rebinding on one
# node makes the old generation stale on the other before any provider
# call; clients racing on both nodes for the last free connection:
# exactly one wins; renew, release and an admin revoke are cluster-wide;
# Redis keeps only the owner's SHA-256, with TTLs; Redis down: lifecycle
# calls are refused (503), managed requests go on; Redis back empty: the
# leases it lost are dropped.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use JSON::PP;
use Digest::SHA qw(sha256_hex);
use Time::HiRes qw(sleep time);
use OmniTest;
use RedisServer;
use OmniCluster qw(gw);

OmniTest::need(RedisServer::available(), 'redis-server not installed');

my $LK = 'sk-lease-key-one-0123456789';
my $LK2 = 'sk-lease-key-two-0123456789';
my $PLAIN = 'sk-plain-key-000-0123456789';

my ($na, $redis, $nb, $m) = OmniCluster::pair(
    files => { 'key-a1' => "sk-up-a1\n", 'key-a2' => "sk-up-a2\n",
               lk => "$LK\n", lk2 => "$LK2\n", plain => "$PLAIN\n" });

sub node_config {
    my ($n, $name, $addr) = @_;
    OmniCluster::node_config($n, addr => $addr, name => $name,
        prefix => 't31:', body => OmniCluster::lease_body(lk2 => 1,
                                                          ttl => '30s'),
        server => { leases => 1, api => 'admin' });
}

my $LEASES = '/api/v1/session-leases';
my @tokens;

sub lease {
    my ($n, $key, $body) = @_;
    my $r = $n->post(gw($n), $LEASES, $body, Authorization => "Bearer $key");
    $r->{doc} = OmniTest::json($r) || {};
    push @tokens, $r->{doc}{lease}{owner}
        if $r->{doc}{lease} && $r->{doc}{lease}{owner};
    return $r;
}

sub infer {
    my ($n, $key, $owner, $gen) = @_;
    my %h = (Authorization => "Bearer $key");
    $h{'X-OmniRoute-Lease-Owner'} = $owner if defined $owner;
    $h{'X-OmniRoute-Lease-Generation'} = $gen if defined $gen;
    return $n->post(gw($n), '/v1/chat/completions', { model => 'alpha/m' },
                    %h);
}

sub code_of { (OmniTest::json($_[0]) || {})->{error}{code} // '' }

sub wait_for {
    my ($cond, $timeout) = @_;
    my $t0 = time;
    while (time - $t0 < ($timeout // 3)) {
        return (time - $t0) * 1000 if $cond->();
        sleep(0.005);
    }
    return undef;
}

# the lease link of a node is up when a call reaches Redis
my $NOBODY = 'vlo_' . ('B' x 42) . 'A';

sub lease_up {
    my ($n) = @_;
    my $ok = 0;

    # every worker has a link of its own: several answers in a row
    return wait_for(sub {
        $ok = lease($n, $LK, { action => 'renew', owner => $NOBODY,
                               generation => 1 })->{status} == 404
              ? $ok + 1 : 0;
        $ok >= 8 }, 5);
}

node_config($na, 'node-a', 'unix:' . $redis->socket_path);
node_config($nb, 'node-b', $redis->addr);

$na->run(gw($na));
$nb->run(gw($nb));

ok(defined lease_up($na), 'node A: lease calls reach Redis (unix socket)');
ok(defined lease_up($nb), 'node B: lease calls reach Redis (TCP)');

# a lease acquired on A holds its connection on B

my $r = lease($na, $LK, { action => 'acquire' });
is($r->{status}, 200, 'A: acquire') or diag($r->{body});
is($r->{doc}{lease}{ttl_s}, 30,
   'R-LEASE-2 ttl_s is the TTL granted, exactly (Redis\'s clock ahead)');
my $OWNER = $r->{doc}{lease}{owner};
is($r->{doc}{lease}{connection}, 'a1', 'A: lease on a1');
is($r->{doc}{lease}{generation}, 1, 'generation 1');

my $hash = sha256_hex($OWNER);
my $v = $redis->cmd('GET', "t31:lease:owner:$hash");
ok(defined $v, 'Redis: the lease under the owner\'s SHA-256');
like($redis->cmd('GET', 't31:lease:conn:a1') // '', qr/^1 $hash lk a1 1 /,
     'Redis: and under its connection');
my $pttl = $redis->cmd('PTTL', 't31:lease:conn:a1');
ok($pttl > 28000 && $pttl <= 30000, "the connection key expires with the "
   . "lease ($pttl ms)");
$pttl = $redis->cmd('PTTL', "t31:lease:owner:$hash");
ok($pttl > 3_600_000 && $pttl <= 3_630_000,
   "the owner key is kept an hour longer ($pttl ms)");

ok(defined wait_for(sub {
        (infer($nb, $PLAIN)->{headers}{'x-omniroute-connection'} // '')
        eq 'a2' }, 2),
   'B: an unmanaged request passes over a1, leased on A');

$r = infer($nb, $LK, $OWNER, 1);
is($r->{status}, 200, 'B: a managed request with A\'s lease');
is($r->{headers}{'x-omniroute-connection'}, 'a1', 'on a1');

# rebinding on B: the old generation is stale on A, before any upstream

$r = lease($nb, $LK, { action => 'acquire', owner => $OWNER,
                       generation => 1 });
is($r->{status}, 200, 'B: rebinding');
is($r->{doc}{lease}{generation}, 2, 'generation 2');

ok(defined wait_for(sub { code_of(infer($na, $LK, $OWNER, 1))
                          eq 'lease_generation_mismatch' }, 2),
   'A: generation 1 is stale');
$m->clear;
$r = infer($na, $LK, $OWNER, 1);
is($r->{status}, 409, 'A: 409 for the stale generation');
is(scalar @{$m->requests}, 0, 'R-LEASE-3 and the provider saw nothing');
is(infer($na, $LK, $OWNER, 2)->{status}, 200, 'A: generation 2 is served');

# racing on both nodes for the last free connection

my @socks;
for my $i (1 .. 12) {
    my $n = $i % 2 ? $na : $nb;
    push @socks, $n->start_post(gw($n), $LEASES,
                                encode_json({ action => 'acquire' }),
                                Authorization => 'Bearer '
                                                 . ($i % 3 ? $LK2 : $LK),
                                'Content-Type' => 'application/json');
}
my @res = map { OmniTest::finish($_) } @socks;
my @won = grep { $_->{status} == 200 } @res;
is(scalar @won, 1, 'R-LEASE-3 one of 12 acquires on two nodes wins a2')
    or diag(join ' ', map { $_->{status} } @res);
is(scalar(grep { $_->{status} == 429 } @res), 11, 'the others: 429');
my $w = OmniTest::json($won[0]) || {};
is($w->{lease}{connection}, 'a2', 'the winner holds a2');
push @tokens, $w->{lease}{owner} if $w->{lease};
my $OWNER2 = $w->{lease}{owner};
my $KEY2 = $w->{lease}{key} eq 'lk' ? $LK : $LK2;

# capacity: 429 on both nodes

ok(defined wait_for(sub { infer($nb, $PLAIN)->{status} == 429 }, 2),
   'B: every connection leased: 429');
$r = infer($na, $PLAIN);
is(code_of($r), 'lease-capacity-unavailable', 'A too');
ok($r->{headers}{'retry-after'} >= 1 && $r->{headers}{'retry-after'} <= 30,
   'with Retry-After');

# renew on A, release on B

$r = lease($na, $KEY2, { action => 'renew', owner => $OWNER2,
                         generation => 1 });
is($r->{status}, 200, 'A: renew of the winner\'s lease');
$r = lease($nb, $KEY2, { action => 'release', owner => $OWNER2,
                         generation => 1 });
is($r->{status}, 200, 'B: release');
ok(!defined $redis->cmd('GET', 't31:lease:conn:a2'),
   'Redis: the connection key is gone');
ok(defined wait_for(sub {
        (infer($na, $PLAIN)->{headers}{'x-omniroute-connection'} // '')
        eq 'a2' }, 2),
   'A: a2 is free again');
is(code_of(infer($na, $KEY2, $OWNER2, 1)), 'lease_not_found',
   'A: the released lease is gone');

# an admin revoke on B ends the lease on A

$r = $nb->http(gw($nb), OmniTest::request_text('DELETE',
                   '/admin/api/resilience/leases', '{"connection":"a1"}'));
is_deeply(OmniTest::json($r), { revoked => 1, connections => ['a1'] },
          'B: revoke a1');
ok(defined wait_for(sub { code_of(infer($na, $LK, $OWNER, 2))
                          eq 'lease_not_found' }, 2),
   'A: the revoked lease is gone');
ok(defined wait_for(sub { !defined $redis->cmd('GET', 't31:lease:conn:a1') },
                    2), 'Redis: its keys are gone');
is((OmniTest::json($na->get(gw($na), '/admin/api/resilience/leases'))
    || {})->{count}, 0, 'A lists no lease');

# nothing in Redis, the logs or the answers holds an owner token

$r = lease($na, $LK, { action => 'acquire' });
my $OWNER3 = $r->{doc}{lease}{owner};
my @keys = $redis->keys('t31:*');
my $dump = join "\n", map { $redis->cmd('GET', $_) // '' } @keys;
my @lease_keys = grep { /:lease:/ } @keys;
ok(@lease_keys >= 2, 'lease keys in Redis: ' . join(' ', sort @lease_keys));
is_deeply([grep { $redis->cmd('PTTL', $_) <= 0 } @lease_keys], [],
          'every lease key has a TTL');
my $logs = join '', map { $_->error_log . $_->read_file('logs/access.log') }
                    $na, $nb;
my $api = join '', map { $_->get(gw($_), '/admin/api/resilience/leases')
                           ->{body}
                         . $_->get(gw($_), '/admin/metrics')->{body} }
                   $na, $nb;
ok(@tokens >= 3, scalar(@tokens) . ' owner tokens made');
is(scalar(grep { index($dump, $_) >= 0 } @tokens), 0,
   'R-LEASE-2 no owner token in Redis');
is(scalar(grep { index($logs, $_) >= 0 } @tokens), 0,
   'nor in the logs');
is(scalar(grep { index($api, $_) >= 0 || index($api, sha256_hex($_)) >= 0 }
          @tokens), 0, 'nor in the admin API or the metrics');

# Redis down: lifecycle calls refused, managed requests go on

$redis->stop;
ok(defined wait_for(sub { lease($nb, $LK, { action => 'acquire' })->{status}
                          == 503 }, 3),
   'Redis down: acquire is refused');
is(code_of(lease($na, $LK, { action => 'renew', owner => $OWNER3,
                             generation => 1 })),
   'lease_backend_unavailable', 'and renew, with a clear code');
is(infer($na, $LK, $OWNER3, 1)->{status}, 200,
   'a managed request is served from the zone');

# Redis back, empty: the leases it lost are dropped on the next load

$redis->start;
ok(defined lease_up($na), 'A: back');
ok(defined lease_up($nb), 'B: back');
ok(defined wait_for(sub { code_of(infer($na, $LK, $OWNER3, 1))
                          eq 'lease_not_found' }, 5),
   'a lease Redis lost is no longer honored');
$r = lease($nb, $LK2, { action => 'acquire' });
is($r->{status}, 200, 'B: a new acquire after the restart');
is($r->{doc}{lease}{connection}, 'a1', 'gets a1 again');

$nb->stop;
$nb->check_error_log;
$na->{allow_log} = qr/leases: /;
$na->done;

done_testing;
