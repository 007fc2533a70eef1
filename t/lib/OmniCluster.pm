package OmniCluster;

# The set-up the two-node cluster tests share: nginx nodes on one
# redis-server, their links, the state read through the debug location
# and the admin API, the session-lease calls, and the wire format of the
# Redis records (for tests that write hostile ones).  Core Perl only.
#
#   my ($na, $redis, $nb, $m) = OmniCluster::pair(files => {...});
#   sub node_config {            # the test's: its prefix, body, locations
#       OmniCluster::node_config($_[0], addr => $redis->addr,
#           name => $_[1], prefix => 't99:', body => ..., server => {...});
#   }
#   OmniCluster::start_nodes(\&node_config, $na => 'node-a', $nb => ...);
#   ok(OmniCluster::links_up($na, $nb), 'both links up');
#
# The admin API is reached at $OmniCluster::API_PREFIX ('' or '/admin')
# with $OmniCluster::API_TOKEN (undef: no Authorization header).

use strict;
use warnings;

use Digest::SHA qw(sha256_hex);
use JSON::PP;
use Time::HiRes qw(sleep time);
use OmniTest;
use RedisServer;

use Exporter 'import';
our @EXPORT_OK = qw(gw server_block wait_for rec stats links_up api metric
                    rejected chat lease infer conn_of leases_count lease_up
                    redis_now lease_line value message breaker conn lockout
                    pin override);
our %EXPORT_TAGS = (all => \@EXPORT_OK);

our $API_PREFIX = '';
our $API_TOKEN;
our $LEASES = '/api/v1/session-leases';

# node A (OmniTest->new(%test)), a redis-server (RedisServer->new(%redis)),
# node B sharing A's mock 'p', the files of %files (name => content) in
# both nodes' directories
sub pair {
    my (%opt) = @_;

    my $na = OmniTest->new(%{$opt{test} || {}});
    my $redis = RedisServer->new($na, %{$opt{redis} || {}})->start;
    my $nb = RedisServer::cluster_node($na, 'b');
    my $m = $na->mock('p');

    $nb->{ports}{mock_p} = $na->port('mock_p');

    for my $n ($na, $nb) {
        $n->write_file($_, $opt{files}{$_})
            for sort keys %{$opt{files} || {}};
    }

    return ($na, $redis, $nb, $m);
}

# configure (with $config->($node, $name)) and start each node, in order
sub start_nodes {
    my ($config, @pairs) = @_;
    my @nodes;

    while (my ($n, $name) = splice(@pairs, 0, 2)) {
        $config->($n, $name);
        push @nodes, $n;
    }
    $_->run(gw($_)) for @nodes;

    return @nodes;
}

sub gw { $_[0]->port('gw') }

# a node's configuration: a 1m zone; omniroute_redis ADDR node=NAME
# prefix=PREFIX, quick to reconnect, and the options of redis_opts; the
# text of body; server_block(%$server)
sub node_config {
    my ($n, %o) = @_;
    my $opts = defined $o{redis_opts} ? " $o{redis_opts}" : '';

    $n->config(<<"END");
    omniroute_zone zone=omniroute:1m;
    omniroute_redis $o{addr} node=$o{name} prefix=$o{prefix} timeout=1s
                    backoff=20ms backoff_max=200ms$opts;

$o{body}
${\ server_block(%{$o{server} || {}})}
END
}

# the body of the tests of untrusted records: providers alpha (a1, a2),
# beta (b1), delta, session affinity
our $UNTRUSTED_BODY = <<'END';
    omniroute_provider alpha url=http://127.0.0.1:%%PORT_mock_p%%/alpha
                       kind=apikey;
    omniroute_provider beta url=http://127.0.0.1:%%PORT_mock_p%%/beta;
    omniroute_provider delta url=http://127.0.0.1:%%PORT_mock_p%%/delta;

    omniroute_connection a1 provider=alpha key_file=%%TESTDIR%%/key-a1
                         priority=1;
    omniroute_connection a2 provider=alpha key_file=%%TESTDIR%%/key-a2
                         priority=2;
    omniroute_connection b1 provider=beta key_file=%%TESTDIR%%/key-b1;

    omniroute_session_affinity 10m;
END

# the body of the lease tests: provider alpha (a1, a2), the exclusive
# lease key lk (and lk2 with lk2 => 1), the key plain, omniroute_lease_ttl
# ttl (default "30s max=1h")
sub lease_body {
    my (%o) = @_;
    my $lk2 = !$o{lk2} ? '' : <<'END';
    omniroute_client_key lk2 file=%%TESTDIR%%/lk2 connections=a1,a2
                         scope=lease:exclusive;
END
    my $ttl = $o{ttl} // '30s max=1h';

    return <<"END";
    omniroute_provider alpha url=http://127.0.0.1:%%PORT_mock_p%%/alpha;
    omniroute_connection a1 provider=alpha key_file=%%TESTDIR%%/key-a1
                         priority=1;
    omniroute_connection a2 provider=alpha key_file=%%TESTDIR%%/key-a2
                         priority=2;

    omniroute_client_key lk file=%%TESTDIR%%/lk connections=a1,a2
                         scope=lease:exclusive;
$lk2    omniroute_client_key plain file=%%TESTDIR%%/plain connections=a1,a2;

    omniroute_lease_ttl $ttl;
END
}

# the server block of a node: the gateway (/v1/) and the params location
# (unless gateway => 0) and, by %o, the session leases (leases => 1), the
# link and stats variables at /link and /stats (link => 1, stats => 1), the
# debug location (debug => 1),
# the admin API at / with the token of OMNI_TEST_API_TOKEN (api => 'token'),
# at /admin/ without one (api => 'admin') or at /api/ and /metrics (api =>
# 'paths': the token is the http block's); then the text of extra
sub server_block {
    my (%o) = @_;
    my $s = <<'END';
    server {
        listen 127.0.0.1:%%PORT_gw%%;
END
    $s .= <<'END' if $o{gateway} // 1;

        location /v1/ {
            omniroute_pass;
        }
END
    $s .= <<'END' if $o{leases};

        location = /api/v1/session-leases {
            omniroute_session_leases;
        }
END
    $s .= <<'END' if $o{gateway} // 1;

        location /_omniroute {
            internal;
            include %%PARAMS%%;
        }
END
    $s .= <<'END' if $o{link};

        location /link {
            return 200 "$omniroute_redis_link";
        }
END
    $s .= <<'END' if $o{stats};

        location /stats {
            return 200 "$omniroute_redis_stats";
        }
END
    $s .= <<'END' if $o{debug};

        location /debug {
            omniroute_redis_debug;
        }
END
    $s .= <<'END' if ($o{api} // '') eq 'token';

        location / {
            omniroute_api;
            omniroute_api_token env=OMNI_TEST_API_TOKEN;
        }
END
    $s .= <<'END' if ($o{api} // '') eq 'admin';

        location /admin/ {
            omniroute_api prefix=/admin;
            omniroute_api_token off;
        }
END
    $s .= <<'END' if ($o{api} // '') eq 'paths';

        location /api/ {
            omniroute_api;
        }

        location = /metrics {
            omniroute_api;
        }
END
    $s .= $o{extra} // '';
    return $s . "    }\n";
}

# true once $cond holds, false after $timeout seconds (default 5)
sub wait_for {
    my ($cond, $timeout) = @_;
    my $t0 = time;
    while (time - $t0 < ($timeout // 5)) {
        return 1 if $cond->();
        sleep(0.02);
    }
    return 0;
}

###########################################################################
# state: the debug location (/debug, omniroute_redis_debug), the admin API

sub rec {
    my ($n, $q) = @_;
    my $r = $n->get(gw($n), "/debug?$q");
    return eval { decode_json($r->{body}) } || { error => $r->{body} };
}

sub stats { rec($_[0], '') }

# every node's link reported up by /debug
sub links_up {
    my (@nodes) = @_;
    my $timeout = ref $nodes[-1] ? 5 : pop @nodes;
    return wait_for(sub {
        !grep { (stats($_)->{state} // '') ne 'up' } @nodes }, $timeout);
}

sub api {
    my ($n, $method, $path) = @_;
    my @auth = defined $API_TOKEN ? (Authorization => "Bearer $API_TOKEN")
                                  : ();
    my $r = $n->http(gw($n), OmniTest::request_text($method,
                     "$API_PREFIX$path", undef, @auth));
    $r->{json} = eval { decode_json($r->{body}) };
    return $r;
}

sub metric {
    my ($n, $name) = @_;
    my $body = api($n, 'GET', '/metrics')->{body} // '';
    return $body =~ /^\Q$name\E (\S+)$/m ? $1 : undef;
}

sub rejected { metric($_[0], 'omniroute_redis_records_rejected_total') // 0 }

sub chat {
    my ($n, %h) = @_;
    return $n->post(gw($n), '/v1/chat/completions',
                    { model => 'alpha/m', messages => [] }, %h);
}

###########################################################################
# session leases

sub lease {
    my ($n, $key, $body) = @_;
    my $r = $n->post(gw($n), $LEASES, $body, Authorization => "Bearer $key");
    $r->{doc} = OmniTest::json($r) || {};
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

sub conn_of { $_[0]->{headers}{'x-omniroute-connection'} // '' }

sub leases_count {
    my ($n) = @_;
    return (OmniTest::json(api($n, 'GET', '/api/resilience/leases'))
            || {})->{count};
}

# the lease link of a node is up when a call reaches Redis: every worker
# has a link of its own, so 8 answers in a row (a renew of nobody: 404)
our $NOBODY = 'vlo_' . ('B' x 42) . 'A';

sub lease_up {
    my ($n, $key, $timeout) = @_;
    my $ok = 0;
    return wait_for(sub {
        $ok = lease($n, $key, { action => 'renew', owner => $NOBODY,
                                generation => 1 })->{status} == 404
              ? $ok + 1 : 0;
        $ok >= 8 }, $timeout);
}

# Redis's clock, ms
sub redis_now {
    my ($redis) = @_;
    my $t = $redis->cmd('TIME');
    return $t->[0] * 1000 + int($t->[1] / 1000);
}

# a lease record: "1 OWNERHEX KEY CONN GENERATION VERSION ACQUIRED BOUND
# EXPIRES STATE"
sub lease_line {
    my ($redis, %f) = @_;
    my $now = redis_now($redis);
    return join ' ', 1, $f{owner} // sha256_hex(rand()), $f{key} // 'lk',
           $f{conn} // 'a2', $f{gen} // 1, $f{ver} // $now * 1000,
           $f{acq} // $now, $f{bound} // $now, $f{exp} // $now + 600_000,
           $f{state} // 1;
}

###########################################################################
# the wire format (src/core/or_wire.h) and the states (src/core/or_*.h),
# x86-64 layouts

our %TABLE = (breaker => 0, conn => 1, lockout => 2, rejected => 3,
              settings => 5, pin => 6);
our $NOW = int(time * 1000);
our $MAX = 9223372036854775807;
our $MIN = -9223372036854775807 - 1;

# "OR" version table | size | time | state
sub value {
    my ($table, $state, $time) = @_;
    return pack('a2CCVq<', 'OR', 1, $TABLE{$table}, length $state,
                $time // $NOW) . $state;
}

# "OR" version op table node_len key_len 0 | time | size | 0 | node key state
sub message {
    my ($table, $key, $state, %o) = @_;
    my $node = $o{node} // 'evil';
    return pack('a2CCCCCCq<VV', 'OR', 1, 0, $TABLE{$table}, length $node,
                length $key, 0, $o{time} // $NOW, length $state, 0)
           . $node . $key . $state;
}

# or_breaker_t, 320 bytes
sub breaker {
    my (%f) = @_;
    my @ring = @{$f{ring} // []};
    push @ring, 0 while @ring < 32;
    return pack('VVq<q<q<q<q<', $f{epoch} // 0, $f{gate_epoch} // 0,
                $f{last_failure_at} // 0, $f{opened_at} // 0,
                $f{open_until} // 0, $f{probe_until} // 0,
                $f{gate_until} // 0)
           . pack('q<32', @ring)
           . pack('VvvCCCCV', $f{failures} // 0, $f{open_cycles} // 0,
                  $f{successes} // 0, $f{state} // 0, $f{last_reason} // 0,
                  $f{ring_len} // 0, 0, $f{reserved1} // 0);
}

# or_conn_state_t, 56 bytes
sub conn {
    my (%f) = @_;
    return pack('VVq<q<q<q<VvvvssCC', $f{reset_epoch} // 0,
                $f{clear_epoch} // 0, $f{terminal_at} // 0, $f{until} // 0,
                $f{mark_at} // 0, $f{last_error_at} // 0, $f{failures} // 0,
                $f{backoff_level} // 0, 0, 0, $f{last_status} // 0, 0,
                $f{terminal} // 0, $f{last_reason} // 0);
}

# or_lockout_t, 48 bytes
sub lockout {
    my (%f) = @_;
    return pack('VVq<q<q<q<sCCV', $f{epoch} // 0, $f{failures} // 0,
                $f{until} // 0, $f{mark_at} // 0, $f{last_failure_at} // 0,
                $f{decay_at} // 0, $f{last_status} // 0, $f{reason} // 0,
                $f{scope} // 0, 0);
}

# or_pin_t, 152 bytes
sub pin {
    my (%f) = @_;
    return pack('q<q<VvvZ128', $f{set_at}, $f{until}, $f{hash},
                length $f{conn}, 0, $f{conn});
}

# ngx_omniroute_settings_override_t, 488 bytes: set, value[48], n_codes,
# codes[16], catchall, its reason and scope, reserved, its cooldown
sub override {
    my (%v) = @_;
    my ($set, @value) = (0, (0) x 48);
    for my $i (keys %v) {
        $set |= 1 << $i;
        $value[$i] = $v{$i};
    }
    return pack('Q<q<48l<l<16l<l<l<l<x4q<', $set, @value, 0, (0) x 16,
                0, 0, 0, 0, -1);
}

1;
