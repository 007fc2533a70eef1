#!/usr/bin/perl

# A lease call either happens before its client is answered or never
# (issue 23, finding 3): two nodes, a real redis-server frozen with
# SIGSTOP (it accepts, never answers).  Two acquires and a rebinding
# answered 503 while Redis is frozen change nothing once it resumes (each
# script has a deadline, compared with Redis's TIME); an admin revoke
# waits for Redis and answers 503 with nothing revoked; after the freeze
# the same calls succeed.

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
use OmniCluster qw(gw wait_for lease infer conn_of metric
                   rejected leases_count);

OmniTest::need(RedisServer::available(), 'redis-server not installed');

$OmniCluster::API_PREFIX = '/admin';

my $LK = 'sk-lease-key-one-0123456789';
my $LK2 = 'sk-lease-key-two-0123456789';
my $PLAIN = 'sk-plain-key-000-0123456789';

my ($na, $redis, $nb, $m) = OmniCluster::pair(
    files => { 'key-a1' => "sk-up-a1\n", 'key-a2' => "sk-up-a2\n",
               lk => "$LK\n", lk2 => "$LK2\n",
               plain => "$PLAIN\n" });

sub node_config {
    my ($n, $name) = @_;
    OmniCluster::node_config($n, addr => $redis->addr, name => $name,
        prefix => 't48:', redis_opts => 'resync=1s log_interval=2s',
        body => OmniCluster::lease_body(lk2 => 1),
        server => { leases => 1, api => 'admin' });
}

my $LEASES = $OmniCluster::LEASES;
my $NOBODY = $OmniCluster::NOBODY;

sub lease_up { OmniCluster::lease_up($_[0], $LK) }
sub redis_now { OmniCluster::redis_now($redis) }
sub line { OmniCluster::lease_line($redis, @_) }


sub lease_keys { grep { !/:lease:seq$/ } $redis->keys('t48:lease:*') }

# frozen for longer than timeout=1s: the node gives up, then Redis resumes
# and runs what it had read
sub frozen {
    my ($what) = @_;
    $redis->pause;
    my @r = $what->();
    sleep(0.3);                # after the node gave up, still frozen
    $redis->resume;
    return @r;
}

OmniCluster::start_nodes(\&node_config, $na => 'node-a', $nb => 'node-b');

ok(lease_up($na) && lease_up($nb), 'both nodes: lease calls reach Redis');

# two acquires answered 503 never become leases

my @r = frozen(sub {
    my @s = map { $na->start_post(gw($na), $LEASES,
                                  encode_json({ action => 'acquire' }),
                                  Authorization => "Bearer $_",
                                  'Content-Type' => 'application/json') }
                ($LK, $LK2);
    return map { OmniTest::finish($_) } @s;
});
is_deeply([map { $_->{status} } @r], [503, 503],
          'two acquires while Redis is frozen: 503');
like($r[0]{body}, qr/lease_backend_unavailable/, 'lease_backend_unavailable');
ok(lease_up($na), 'Redis resumed: lease calls go through again');
is_deeply([lease_keys()], [], 'no lease key in Redis: the late scripts did '
          . 'nothing');
is(conn_of(infer($nb, $PLAIN)), 'a1', 'B: a1 is free');
is(leases_count($na), 0, 'A lists no lease');

my $r = lease($na, $LK, { action => 'acquire' });
is($r->{status}, 200, 'an acquire after the freeze');
is($r->{doc}{lease}{generation}, 1, 'generation 1');
my $OWNER = $r->{doc}{lease}{owner};
my $CONN = $r->{doc}{lease}{connection};

# a rebinding answered 503 does not move the owner to generation 2

($r) = frozen(sub { lease($na, $LK, { action => 'acquire', owner => $OWNER,
                                      generation => 1 }) });
is($r->{status}, 503, 'a rebinding while Redis is frozen: 503');
ok(lease_up($na), 'resumed');
like($redis->cmd('GET', 't48:lease:owner:' . sha256_hex($OWNER)) // '',
     qr/^1 [0-9a-f]{64} lk \Q$CONN\E 1 /,
     'Redis: the owner is still at generation 1');
is(infer($na, $LK, $OWNER, 1)->{status}, 200, 'A serves generation 1');
ok(wait_for(sub { infer($nb, $LK, $OWNER, 1)->{status} == 200 }),
   'and so does B');
is(lease($nb, $LK, { action => 'renew', owner => $OWNER,
                     generation => 1 })->{status}, 200,
   'renew of generation 1 through Redis');

# an admin revoke waits for Redis: 503, nothing revoked

my $t0 = time;
($r) = frozen(sub {
    $na->http(gw($na), OmniTest::request_text('DELETE',
              '/admin/api/resilience/leases', '{"connection":"' . $CONN
              . '"}'));
});
my $took = time - $t0;
is($r->{status}, 503, sprintf('an admin revoke while Redis is frozen: 503 '
                              . '(after %.2f s)', $took));
like($r->{body}, qr/lease_backend_unavailable/, 'lease_backend_unavailable');
ok(lease_up($na), 'resumed');
ok(defined $redis->cmd('GET', "t48:lease:conn:$CONN"),
   'Redis still holds the lease');
is(infer($na, $LK, $OWNER, 1)->{status}, 200, 'A still serves the owner');
is(infer($nb, $LK, $OWNER, 1)->{status}, 200, 'and so does B');

# and with Redis up the revoke is answered once Redis has done it

$r = $na->http(gw($na), OmniTest::request_text('DELETE',
               '/admin/api/resilience/leases', '{"connection":"' . $CONN
               . '"}'));
is_deeply(OmniTest::json($r), { revoked => 1, connections => [$CONN] },
          'the revoke again, Redis up: revoked');
ok(!defined $redis->cmd('GET', "t48:lease:conn:$CONN"),
   'Redis no longer holds it when the answer comes');
ok(wait_for(sub { ((OmniTest::json(infer($nb, $LK, $OWNER, 1)) || {})
                   ->{error}{code} // '') eq 'lease_not_found' }),
   'B: the revoked lease is gone');

$nb->{allow_log} = qr/leases: /;
$na->{allow_log} = qr/leases: /;
$nb->done;
$na->done;
$redis->stop;

done_testing;
