#!/usr/bin/perl

# R-ROUTE: a combo's strategy orders its candidates with state shared by
# the workers: round-robin spreads evenly over both workers; weighted
# follows the weights; priority keeps the configured order.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use OmniTest;

my $t = OmniTest->new;
my $m = $t->mock('p');

$t->write_file("key-$_", "sk-$_\n") for qw(a b c d);

$t->config(<<'EOF');
    omniroute_zone zone=omniroute:1m;

    omniroute_provider p url=http://127.0.0.1:%%PORT_mock_p%%/v1;
    omniroute_provider q url=http://127.0.0.1:%%PORT_mock_p%%/q;

    omniroute_connection a provider=p key_file=%%TESTDIR%%/key-a weight=3;
    omniroute_connection b provider=p key_file=%%TESTDIR%%/key-b;
    omniroute_connection c provider=q key_file=%%TESTDIR%%/key-c;
    omniroute_connection d provider=q key_file=%%TESTDIR%%/key-d;

    omniroute_combo rr strategy=round-robin p/m q/m;
    omniroute_combo wt strategy=weighted p/m;
    omniroute_combo prio p/m q/m;

    log_format omni '$pid $omniroute_connection';

    server {
        listen 127.0.0.1:%%PORT_gw%% reuseport;
        access_log %%TESTDIR%%/logs/omni.log omni;

        location /v1/ {
            omniroute_pass;
        }

        location /_omniroute {
            internal;
            include %%PARAMS%%;
        }
    }
EOF

$t->run($t->port('gw'));
my $gw = $t->port('gw');

sub count {
    my ($model, $n) = @_;
    my %seen;
    for (1 .. $n) {
        my $r = $t->post($gw, '/v1/chat/completions', { model => $model });
        $seen{$r->{headers}{'x-omniroute-connection'} // 'none'}++;
    }
    return \%seen;
}

is_deeply(count('rr', 40), { a => 10, b => 10, c => 10, d => 10 },
          'R-ROUTE round-robin: 40 requests, 10 per connection');

is_deeply(count('wt', 40), { a => 30, b => 10 },
          'R-ROUTE weighted 3:1 over 40 requests');

is_deeply(count('prio', 5), { a => 5 }, 'R-ROUTE priority: the first');

$t->stop_nginx;
my %pids;
for (split /\n/, $t->read_file('logs/omni.log')) {
    my ($pid, $conn) = split / /;
    $pids{$pid}++;
}
cmp_ok(scalar keys %pids, '>=', 2,
       'R-ROUTE the requests were served by both workers (shared cursor)');

$t->done;
done_testing;
