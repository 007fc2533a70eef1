#!/usr/bin/perl

# R-ML-1..4: model lockout by scope (quota family for 429, base model for
# 404, exact otherwise) with success decay; R-CLUSTER-1: a deliberately
# tiny zone under many distinct models keeps serving.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use Time::HiRes qw(sleep);
use OmniTest;

my $t = OmniTest->new;
my $m = $t->mock('p');

$t->write_file('key', "sk-1\n");

$t->config(<<'EOF');
    omniroute_zone zone=omniroute:32k;

    omniroute_model_lockout on base=1s max=1m;

    omniroute_provider lo url=http://127.0.0.1:%%PORT_mock_p%%/v1
                       quota_family=gpt-5;
    omniroute_provider nolock url=http://127.0.0.1:%%PORT_mock_p%%/nl
                       lockout=off;
    omniroute_connection c1 provider=lo key_file=%%TESTDIR%%/key;
    omniroute_connection n1 provider=nolock key_file=%%TESTDIR%%/key;

    %%GATEWAY%%
EOF

$t->run($t->port('gw'));
my $gw = $t->port('gw');

sub ask {
    my ($model) = @_;
    return $t->post($gw, '/v1/chat/completions', { model => $model });
}

sub lockout {
    my ($model) = @_;
    my $r = ask($model);
    return undef unless $r->{status} == 503;
    return OmniTest::json($r)->{diagnostics}{excluded}[0];
}

# 429 locks the quota family of the connection (R-ML-2)
$m->set_behavior('status=429');
is(ask('lo/gpt-5-mini')->{status}, 429, 'a 429 on gpt-5-mini');
$m->set_behavior(undef);

my $ex = lockout('lo/gpt-5');
is($ex && $ex->{reason}, 'model_lockout',
   'R-ML-2 429 locks the quota family: gpt-5 too');
is($ex && $ex->{retry_after_s}, 1, 'R-ML-3 for the base cooldown');
is(ask('lo/gpt-4o')->{status}, 200,
   'R-ML-1 another model of the connection still works');

# 404 locks the base model
$m->set_behavior('status=404');
is(ask('lo/claude-3-5-sonnet-20241022')->{status}, 404, 'a 404');
$m->set_behavior(undef);
$ex = lockout('lo/claude-3-5-sonnet-20240620');
is($ex && $ex->{reason}, 'model_lockout',
   'R-ML-2 404 locks the base model: another dated version too');
is(ask('lo/claude-3-opus')->{status}, 200, 'a different base model works');

# anything else locks the exact model
$m->set_behavior('status=503');
is(ask('lo/llama-3-70b')->{status}, 503, 'a 503');
$m->set_behavior(undef);
ok(lockout('lo/llama-3-70b'), 'R-ML-2 503 locks the exact model');
is(ask('lo/llama-3-8b')->{status}, 200, 'not its siblings');

# escalation and success decay (R-ML-3, R-ML-4) on one exact model
sleep(1.1);
$m->set_behavior('status=502');
ask('lo/llama-3-70b');
is(lockout('lo/llama-3-70b')->{retry_after_s}, 2,
   'R-ML-3 second failure: base x 2 = 2 s');

sleep(2.1);
$m->set_behavior(undef);
is(ask('lo/llama-3-70b')->{status}, 200, 'a success after the lockout');
$m->set_behavior('status=502');
ask('lo/llama-3-70b');
is(lockout('lo/llama-3-70b')->{retry_after_s}, 2,
   'R-ML-4 the success halved the failure count (2 -> 1): 2 s, not 4 s');
$m->set_behavior(undef);

# lockout=off on a provider: the failure cools the connection instead
$m->set_behavior('status=429');
ask('nolock/x');
$m->set_behavior(undef);
$ex = lockout('nolock/y');
is($ex && $ex->{reason}, 'provider_cooldown',
   'R-ML-1 opt-in: without lockout the connection cools down');

# a 32k zone and 600 distinct locked models (429: quota family, no
# breaker count): the store evicts, requests
# are still served (R-CLUSTER-1)
$m->set_behavior('status=429');
my $bad = 0;
for my $i (1 .. 600) {
    my $r = ask("lo/m-$i");
    $bad++ unless $r->{status} == 429;
}
is($bad, 0, 'R-CLUSTER-1 600 distinct models all answered by the provider');
$m->set_behavior(undef);
is(ask('lo/fresh-model')->{status}, 200, 'and the gateway still serves');
unlike($t->error_log, qr/\[alert\]|could not allocate/,
       'no allocation alert');

$t->done;
done_testing;
