#!/usr/bin/perl

# Redis as production runs it (issue 28): TLS to Redis (omniroute_redis
# tls=on tls_ca= [tls_cert= tls_key=] [tls_name=]).  Built against a
# hiredis with hiredis_ssl (Debian 13 and later): a redis-server that
# speaks TLS only to the nodes and wants a client certificate; the mirror
# and the leases work through it, a node without the client certificate
# stays down.  Built without (Debian 12's hiredis 0.14): nginx -t says
# that tls=on is not available.  Either way: TLS parameters without
# tls=on, or bad files, fail nginx -t.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use Time::HiRes qw(sleep time);
use OmniTest;
use RedisServer;
use OmniCluster qw(gw server_block wait_for);

OmniTest::need(RedisServer::available(), 'redis-server not installed');

# what this build has: hiredis_ssl is found by "config" where its header is
my $HAVE_SSL = -e '/usr/include/hiredis/hiredis_ssl.h';

my $na = OmniTest->new;
my $d = $na->dir;

OmniTest::need(system("cd $d && openssl req -x509 -newkey ec "
                      . "-pkeyopt ec_paramgen_curve:prime256v1 -nodes "
                      . "-days 2 -subj /CN=test-ca -keyout ca.key "
                      . "-out ca.crt >/dev/null 2>&1") == 0,
               'openssl cannot make a certificate');

for my $who (qw(redis client)) {
    system("cd $d && openssl req -newkey ec "
           . "-pkeyopt ec_paramgen_curve:prime256v1 -nodes "
           . "-subj /CN=$who.test -keyout $who.key -out $who.csr "
           . ">/dev/null 2>&1 && openssl x509 -req -in $who.csr -CA ca.crt "
           . "-CAkey ca.key -CAcreateserial -days 2 -out $who.crt "
           . ">/dev/null 2>&1") == 0 or BAIL_OUT("openssl: $who");
}

my $LK = 'sk-lease-key-tls-0123456789';

$na->write_file("key-$_", "sk-up-$_\n") for qw(a1 a2);
$na->write_file('lk', "$LK\n");

sub node_config {
    my ($n, $name, $redis_args) = @_;

    $n->config(<<"EOF");
    omniroute_zone zone=omniroute:1m;
    omniroute_redis $redis_args node=$name prefix=t28t: timeout=1s
                    backoff=20ms backoff_max=200ms log_interval=60s;

    omniroute_provider alpha url=http://127.0.0.1:1/alpha;
    omniroute_connection a1 provider=alpha key_file=%%TESTDIR%%/key-a1;
    omniroute_connection a2 provider=alpha key_file=%%TESTDIR%%/key-a2;

    omniroute_client_key lk file=%%TESTDIR%%/lk connections=a1,a2
                         scope=lease:exclusive;

${\ server_block(gateway => 0, leases => 1, link => 1)}
EOF
}

sub nginx_t {
    my ($n, $args) = @_;
    node_config($n, 'node-a', $args);
    my ($rc, $out) = $n->test_config;
    return ($rc, $out);
}

my $ADDR = '127.0.0.1:' . $na->port('redis_tls');
my $T = '%%TESTDIR%%';

# the same for every build

my ($rc, $out) = nginx_t($na, "$ADDR tls_ca=$T/ca.crt");
ok($rc != 0 && $out =~ /require "tls=on"/,
   'nginx -t: tls_ca= without tls=on') or diag($out);
($rc, $out) = nginx_t($na, "$ADDR tls=yes");
ok($rc != 0 && $out =~ /invalid parameter "tls=yes"/,
   'nginx -t: tls=yes is no value') or diag($out);

unless ($HAVE_SSL) {
    ($rc, $out) = nginx_t($na, "$ADDR tls=on tls_ca=$T/ca.crt");
    ok($rc != 0 && $out =~ /"tls=on" is not available: this module was built against a hiredis without hiredis_ssl/,
       'built without hiredis_ssl: nginx -t says tls=on is not available')
        or diag($out);
    done_testing();
    exit;
}

# built with hiredis_ssl

($rc, $out) = nginx_t($na, "$ADDR tls=on");
ok($rc != 0 && $out =~ /"tls=on" requires "tls_ca="/,
   'nginx -t: tls=on without a CA file') or diag($out);
($rc, $out) = nginx_t($na, "$ADDR tls=on tls_ca=$T/missing.crt");
ok($rc != 0 && $out =~ /TLS: .*missing\.crt/,
   'nginx -t: a CA file that is not there') or diag($out);
($rc, $out) = nginx_t($na, "$ADDR tls=on tls_ca=$T/ca.crt "
                           . "tls_cert=$T/client.crt");
ok($rc != 0 && $out =~ /"tls_cert=" and "tls_key=" go together/,
   'nginx -t: a certificate without its key') or diag($out);
($rc, $out) = nginx_t($na, "unix:$d/redis.sock tls=on tls_ca=$T/ca.crt");
ok($rc != 0 && $out =~ /needs an IP address/,
   'nginx -t: tls=on on a unix socket') or diag($out);

# a Redis that speaks TLS on the nodes' port and wants a client
# certificate (the plain port is the test's)

my $redis = RedisServer->new($na, args => [
    '--tls-port', $na->port('redis_tls'),
    '--tls-cert-file', "$d/redis.crt", '--tls-key-file', "$d/redis.key",
    '--tls-ca-cert-file', "$d/ca.crt", '--tls-auth-clients', 'yes' ])->start;

my $nb = RedisServer::cluster_node($na, 'b');
$nb->write_file("key-$_", "sk-up-$_\n") for qw(a1 a2);
$nb->write_file('lk', "$LK\n");

node_config($na, 'node-a', "$ADDR tls=on tls_ca=$d/ca.crt "
                           . "tls_cert=$d/client.crt tls_key=$d/client.key "
                           . "tls_name=redis.test");
node_config($nb, 'node-b', "$ADDR tls=on tls_ca=$d/ca.crt");

$na->run($na->port('gw'));
$nb->run($nb->port('gw'));

sub lease { OmniCluster::lease($_[0], $LK, $_[1]) }

ok(wait_for(sub { $na->get($na->port('gw'), '/link')->{body} eq 'up' }),
   'node A: the mirror is up over TLS with a client certificate');
my $r;
ok(wait_for(sub { ($r = lease($na, { action => 'acquire' }))->{status}
                  == 200 }),
   'node A: a lease acquire over TLS');
ok($redis->cmd('EXISTS', 't28t:lease:conn:' . ($r->{doc}{lease}{connection}
                                              // '')),
   'the lease is in Redis');

ok(wait_for(sub { $nb->error_log =~ /node "node-b": .*(connection (lost|failed)|TLS|SSL)/ }),
   'node B (no client certificate): refused by Redis, logged');
isnt($nb->get($nb->port('gw'), '/link')->{body}, 'up',
     'node B: the mirror is not up');
is(lease($nb, { action => 'acquire' })->{status}, 503,
   'node B: a lease call is refused');

$nb->done;
$na->done;
$redis->stop;

done_testing();
